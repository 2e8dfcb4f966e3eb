// Command interop drives franz-go (github.com/twmb/franz-go, a Kafka client written in Go without librdkafka)
// against a broker for kfk's interoperability tests. Each subcommand does one thing and prints one JSON document
// on stdout; the Python tests assert on it and cross-check the broker with confluent-kafka. A failure prints one
// line on stderr and exits 1.
//
//	interop produce  -brokers B -topic T -count N -partitions P -codec lz4
//	interop group    -brokers B -topic T -group G -count N
//	interop create   -brokers B -topic T -partitions P -config retention.ms=60000
//	interop offsets  -brokers B -topic T -after-ms MS
//	interop transact -brokers B -topic T -transactional-id ID -count N
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Record is one record as the tests see it: what was produced (with the offset the broker assigned) or consumed.
type Record struct {
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Key       string            `json:"key"`
	Value     string            `json:"value"`
	Headers   map[string]string `json:"headers"`
	Member    string            `json:"member,omitempty"`
}

// Records the tests expect: key-i / <tag>-value-i with headers index=i and client=franz-go, partition i % P.
func makeRecord(topic, tag string, index, partitions int) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Partition: int32(index % partitions),
		Key:       []byte(fmt.Sprintf("key-%d", index)),
		Value:     []byte(fmt.Sprintf("%s-value-%d", tag, index)),
		Headers: []kgo.RecordHeader{
			{Key: "index", Value: []byte(strconv.Itoa(index))},
			{Key: "client", Value: []byte("franz-go")},
		},
	}
}

func fromKgo(r *kgo.Record, member string) Record {
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	return Record{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value),
		Headers: headers, Member: member}
}

// logLevel is franz-go's logging to stderr (-log none|error|warn|info|debug), for a failing test's diagnosis.
var logLevel = kgo.LogLevelWarn

func newClient(brokers string, opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, logLevel, nil))}
	return kgo.NewClient(append(base, opts...)...)
}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown codec %q", name)
}

// produceAll sends every record and waits for all acknowledgements; the records come back with their offsets.
func produceAll(ctx context.Context, client *kgo.Client, records []*kgo.Record) error {
	return client.ProduceSync(ctx, records...).FirstErr()
}

func produce(ctx context.Context, brokers, topic, codecName string, count, partitions int) (any, error) {
	compression, err := codec(codecName)
	if err != nil {
		return nil, err
	}
	client, err := newClient(brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(compression), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	records := make([]*kgo.Record, count)
	for i := range records {
		records[i] = makeRecord(topic, "franz-go", i, partitions)
	}
	if err := produceAll(ctx, client, records); err != nil {
		return nil, err
	}
	out := make([]Record, count)
	for i, r := range records {
		out[i] = fromKgo(r, "")
	}
	return out, nil
}

// group consumes `count` records with two members of one consumer group, committing synchronously after every
// poll. The first member consumes half alone; then the second joins, the group rebalances (franz-go's default
// cooperative-sticky balancer) and both read the rest. Rebalances are held while polled records are uncommitted
// (BlockRebalanceOnPoll), so every record is consumed exactly once.
func group(ctx context.Context, brokers, topic, groupID string, count int) (any, error) {
	var (
		mu          sync.Mutex
		consumed    []Record
		assignments = map[string][][]int32{} // each member's assignments as franz-go hands them (incremental)
		owned       = map[string]map[int32]bool{"first": {}, "second": {}}
		ownedAtEnd  map[string][]int32
		firstErr    error
	)
	done := make(chan struct{})
	var closeDone sync.Once
	secondAssigned := make(chan struct{})
	var secondOnce sync.Once

	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		closeDone.Do(func() { close(done) })
	}
	newMember := func(name string) (*kgo.Client, error) {
		return newClient(brokers, kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
				partitions := sorted(assigned[topic])
				mu.Lock()
				assignments[name] = append(assignments[name], partitions)
				for _, p := range partitions {
					owned[name][p] = true
				}
				mu.Unlock()
				if name == "second" && len(partitions) > 0 {
					secondOnce.Do(func() { close(secondAssigned) })
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
				mu.Lock()
				for _, p := range revoked[topic] {
					delete(owned[name], p)
				}
				mu.Unlock()
			}))
	}
	// poll reads up to `limit` records, commits them, then lets a pending rebalance go on.
	poll := func(client *kgo.Client, name string, limit int) int {
		pollCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		fetches := client.PollRecords(pollCtx, limit)
		defer client.AllowRebalance()
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				fail(fmt.Errorf("fetch %s[%d]: %w", t, p, err))
			}
		})
		records := fetches.Records()
		if len(records) == 0 {
			return 0
		}
		if err := client.CommitRecords(ctx, records...); err != nil {
			fail(fmt.Errorf("commit by %s: %w", name, err))
			return 0
		}
		mu.Lock()
		for _, r := range records {
			consumed = append(consumed, fromKgo(r, name))
		}
		total := len(consumed)
		if total >= count && ownedAtEnd == nil {
			ownedAtEnd = map[string][]int32{}
			for member, set := range owned {
				partitions := []int32{}
				for p := range set {
					partitions = append(partitions, p)
				}
				ownedAtEnd[member] = sorted(partitions)
			}
		}
		mu.Unlock()
		if total >= count {
			closeDone.Do(func() { close(done) })
		}
		return len(records)
	}
	running := func() bool {
		select {
		case <-done:
			return false
		case <-ctx.Done():
			fail(ctx.Err())
			return false
		default:
			return true
		}
	}

	first, err := newMember("first")
	if err != nil {
		return nil, err
	}
	defer first.Close()
	for alone := 0; alone < count/2 && running(); {
		alone += poll(first, "first", count/2-alone)
	}
	second, err := newMember("second")
	if err != nil {
		return nil, err
	}
	defer second.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for running() {
			poll(second, "second", 50)
		}
	}()
	// The first member keeps heartbeating in the background; it reads again once the second has partitions.
	select {
	case <-secondAssigned:
	case <-done:
	case <-ctx.Done():
		fail(ctx.Err())
	}
	for running() {
		poll(first, "first", 50)
	}
	wg.Wait()
	// Closing the members (deferred) revokes their partitions: answer with what was seen until the last record.
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return nil, firstErr
	}
	history := map[string][][]int32{}
	for member, list := range assignments {
		history[member] = append([][]int32(nil), list...)
	}
	return map[string]any{"records": append([]Record(nil), consumed...), "assignments": history,
		"owned": ownedAtEnd}, nil
}

func sorted(partitions []int32) []int32 {
	out := append([]int32{}, partitions...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// create makes a topic with kadm and describes it back (partitions and the config it was given).
func create(ctx context.Context, brokers, topic string, partitions int, configs []string) (any, error) {
	client, err := newClient(brokers)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	settings := map[string]*string{}
	for _, item := range configs {
		name, value, found := strings.Cut(item, "=")
		if !found {
			return nil, fmt.Errorf("-config wants name=value, got %q", item)
		}
		settings[name] = kadm.StringPtr(value)
	}
	created, err := admin.CreateTopics(ctx, int32(partitions), 1, settings, topic)
	if err != nil {
		return nil, err
	}
	response, err := created.On(topic, nil)
	if err != nil {
		return nil, err
	}
	if response.Err != nil {
		return nil, fmt.Errorf("create %s: %w (%s)", topic, response.Err, response.ErrMessage)
	}
	described, err := admin.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, err
	}
	resource, err := described.On(topic, nil)
	if err != nil {
		return nil, err
	}
	if resource.Err != nil {
		return nil, resource.Err
	}
	config := map[string]string{}
	for _, entry := range resource.Configs {
		if entry.Value != nil {
			config[entry.Key] = *entry.Value
		}
	}
	return map[string]any{"topic": response.Topic, "topic_id": response.ID.String(),
		"partitions": response.NumPartitions, "replication_factor": response.ReplicationFactor,
		"config": config}, nil
}

// offsets lists each partition's start and end offsets and the first offset at or after a timestamp.
func offsets(ctx context.Context, brokers, topic string, afterMs int64) (any, error) {
	client, err := newClient(brokers)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	out := map[string]map[string]int64{}
	for name, list := range map[string]func() (kadm.ListedOffsets, error){
		"start": func() (kadm.ListedOffsets, error) { return admin.ListStartOffsets(ctx, topic) },
		"end":   func() (kadm.ListedOffsets, error) { return admin.ListEndOffsets(ctx, topic) },
		"after": func() (kadm.ListedOffsets, error) { return admin.ListOffsetsAfterMilli(ctx, afterMs, topic) },
	} {
		listed, err := list()
		if err != nil {
			return nil, err
		}
		if err := listed.Error(); err != nil {
			return nil, err
		}
		out[name] = map[string]int64{}
		listed.Each(func(o kadm.ListedOffset) { out[name][strconv.Itoa(int(o.Partition))] = o.Offset })
	}
	return out, nil
}

// transact runs three transactions of `count` records each on one transactional producer: committed, aborted,
// committed. A read_committed consumer must see the first and third only.
func transact(ctx context.Context, brokers, topic, transactionalID string, count int) (any, error) {
	client, err := newClient(brokers, kgo.TransactionalID(transactionalID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	out := map[string][]Record{}
	for round, outcome := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		tag := map[int]string{0: "committed-1", 1: "aborted", 2: "committed-2"}[round]
		if err := client.BeginTransaction(); err != nil {
			return nil, err
		}
		records := make([]*kgo.Record, count)
		for i := range records {
			records[i] = makeRecord(topic, tag, round*count+i, 1)
		}
		if err := produceAll(ctx, client, records); err != nil {
			return nil, err
		}
		if err := client.EndTransaction(ctx, outcome); err != nil {
			return nil, fmt.Errorf("end transaction %s: %w", tag, err)
		}
		for _, r := range records {
			out[tag] = append(out[tag], fromKgo(r, ""))
		}
	}
	return out, nil
}

type configList []string

func (c *configList) String() string     { return strings.Join(*c, ",") }
func (c *configList) Set(v string) error { *c = append(*c, v); return nil }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: interop produce|group|create|offsets|transact [flags]")
		os.Exit(2)
	}
	command := os.Args[1]
	flags := flag.NewFlagSet(command, flag.ExitOnError)
	brokers := flags.String("brokers", "127.0.0.1:9092", "bootstrap servers")
	topic := flags.String("topic", "", "topic")
	count := flags.Int("count", 100, "records")
	partitions := flags.Int("partitions", 1, "partitions")
	codecName := flags.String("codec", "none", "none, gzip, snappy, lz4 or zstd")
	groupID := flags.String("group", "", "consumer group")
	transactionalID := flags.String("transactional-id", "", "transactional.id")
	afterMs := flags.Int64("after-ms", 0, "timestamp (ms) for the after-offsets")
	timeout := flags.Duration("timeout", 60*time.Second, "give up after")
	logName := flags.String("log", "warn", "franz-go's log level on stderr: none, error, warn, info or debug")
	var configs configList
	flags.Var(&configs, "config", "topic config name=value (repeatable)")
	_ = flags.Parse(os.Args[2:])
	levels := map[string]kgo.LogLevel{"none": kgo.LogLevelNone, "error": kgo.LogLevelError,
		"warn": kgo.LogLevelWarn, "info": kgo.LogLevelInfo, "debug": kgo.LogLevelDebug}
	level, known := levels[*logName]
	if !known {
		fmt.Fprintf(os.Stderr, "interop %s: -log: unknown level %q\n", command, *logName)
		os.Exit(2)
	}
	logLevel = level

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var result any
	var err error
	switch command {
	case "produce":
		result, err = produce(ctx, *brokers, *topic, *codecName, *count, *partitions)
	case "group":
		result, err = group(ctx, *brokers, *topic, *groupID, *count)
	case "create":
		result, err = create(ctx, *brokers, *topic, *partitions, configs)
	case "offsets":
		result, err = offsets(ctx, *brokers, *topic, *afterMs)
	case "transact":
		result, err = transact(ctx, *brokers, *topic, *transactionalID, *count)
	default:
		err = fmt.Errorf("unknown command %q", command)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "interop %s: %v\n", command, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(result); err != nil {
		fmt.Fprintf(os.Stderr, "interop %s: %v\n", command, err)
		os.Exit(1)
	}
}
