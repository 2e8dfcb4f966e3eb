import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.DefaultProductionExceptionHandler;
import org.apache.kafka.streams.errors.ErrorHandlerContext;
import org.apache.kafka.streams.errors.LogAndContinueExceptionHandler;
import org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler;
import org.apache.kafka.streams.errors.ProductionExceptionHandler;
import org.apache.kafka.streams.processor.StreamPartitioner;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TableJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * Apache Kafka Streams running the topologies tests/streams/topologies.py builds with kfk.streams, so that a test
 * compares the two. Args: describe <topology,...> <input> <output> (prints each Topology.describe() after a
 * "=== <topology>" line), or
 * run <topology> <bootstrap> <application.id> <input> <output> <state.dir> <guarantee> <records> [<totals>
 * [<statestore.cache.max.bytes> <commit.interval.ms>]]: runs the topology (by default with the record cache off and
 * a commit every 100 ms) until <records> records are on the output topic (and <totals> on <output>-totals;
 * read_committed), then closes and exits. Topology "errors" runs with the continue handlers (skipping what fails
 * to deserialize, to process or to be sent), "errors-fail" is the same with Kafka's default handlers: it runs until
 * the application is in ERROR and exits 0 if it got there; "errors-dlq" is "errors" writing what fails to the dead
 * letter queue <output>-dlq (KIP-1034).
 */
public final class StreamsOracle {
    /** The production handler of the "errors" topology: a record too large to send is skipped, anything else fails. */
    public static final class ContinueOnRecordTooLarge implements ProductionExceptionHandler {
        @Override
        public Response handleError(ErrorHandlerContext context, ProducerRecord<byte[], byte[]> record,
                                    Exception exception) {
            return exception instanceof RecordTooLargeException ? Response.resume() : Response.fail();
        }

        @Override
        public void configure(Map<String, ?> configs) { }
    }

    /** The production handler of "errors-dlq": a record too large to send goes to the dead letter queue, as Kafka's
     * default handler would write it, and is skipped; anything else fails. */
    public static final class DeadLetterOnRecordTooLarge extends DefaultProductionExceptionHandler {
        @Override
        public Response handleError(ErrorHandlerContext context, ProducerRecord<byte[], byte[]> record,
                                    Exception exception) {
            Response response = super.handleError(context, record, exception);
            return exception instanceof RecordTooLargeException
                ? Response.resume(response.deadLetterQueueRecords()) : response;
        }
    }

    static Topology topology(String name, String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(input);
        switch (name) {
            case "stateless": {
                KStream<String, String> words = lines
                    .filterNot((key, line) -> line == null || line.isEmpty())
                    .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split(" ")))
                    .peek((key, word) -> { });
                Map<String, KStream<String, String>> branches = words.split(Named.as("by-length-"))
                    .branch((key, word) -> word.length() > 3, Branched.as("long"))
                    .defaultBranch(Branched.as("short"));
                branches.get("by-length-long").mapValues(word -> word.toUpperCase(Locale.ROOT))
                    .merge(branches.get("by-length-short").map((key, word) -> KeyValue.pair(word, key + ":" + word)))
                    .filter((key, value) -> !value.startsWith("x"))
                    .selectKey((key, value) -> value.substring(0, 1))
                    .to(output);
                break;
            }
            case "wordcount": {
                lines.flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split(" ")))
                    .groupBy((key, word) -> word)
                    .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                    .toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
                break;
            }
            case "table": {
                KTable<String, String> longest = lines.groupByKey()
                    .reduce((previous, line) -> line.length() >= previous.length() ? line : previous);
                longest.filter((key, line) -> line.length() > 2)
                    .mapValues(line -> line + "/" + line.length())
                    .toStream()
                    .to(output);
                lines.mapValues(line -> line.length()).groupByKey()
                    .aggregate(() -> 0L, (key, length, total) -> total + length,
                               Materialized.with(Serdes.String(), Serdes.Long()))
                    .toStream().to(output + "-totals", Produced.with(Serdes.String(), Serdes.Long()));
                break;
            }
            case "windowed": {
                KTable<Windowed<String>, Long> counts = lines.groupByKey()
                    .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(4), Duration.ofMillis(2))
                                .advanceBy(Duration.ofMillis(2)))
                    .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("windowed-counts")
                           .withKeySerde(Serdes.String()));  // suppress() needs the windowed key's serde
                counts.toStream()
                    .map((windowed, count) -> KeyValue.pair(
                        windowed.key() + "@" + windowed.window().start() + "/" + windowed.window().end(), count))
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
                KTable<Windowed<String>, String> joinedLines = lines.groupByKey()
                    .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(5)))
                    .reduce((joined, line) -> joined + "|" + line, Materialized.with(Serdes.String(), Serdes.String()));
                joinedLines.toStream()
                    .map((windowed, joined) -> KeyValue.pair(windowed.key() + "@" + windowed.window().start(), joined))
                    .to(output + "-totals");
                // the final results: each window once, when it closes
                counts.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                    .toStream()
                    .map((windowed, count) -> KeyValue.pair(
                        windowed.key() + "@" + windowed.window().start() + "/" + windowed.window().end(), count))
                    .to(output + "-outer", Produced.with(Serdes.String(), Serdes.Long()));
                joinedLines.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded())
                                     .withName("final-lines"))
                    .toStream()
                    .map((windowed, joined) -> KeyValue.pair(windowed.key() + "@" + windowed.window().start(), joined))
                    .to(output + "-outer", Produced.with(Serdes.String(), Serdes.String()));
                KTable<Windowed<String>, Long> sessions = lines.groupByKey()
                    .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(3), Duration.ofMillis(2)))
                    .count(Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("sessions")
                           .withKeySerde(Serdes.String()));
                sessions.toStream()
                    .map((windowed, count) -> KeyValue.pair(
                        windowed.key() + "#" + windowed.window().start() + "-" + windowed.window().end(), count))
                    .to(output + "-outer", Produced.with(Serdes.String(), Serdes.Long()));
                sessions.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                    .toStream()
                    .map((windowed, count) -> KeyValue.pair(
                        windowed.key() + "$" + windowed.window().start() + "-" + windowed.window().end(), count))
                    .to(output + "-outer", Produced.with(Serdes.String(), Serdes.Long()));
                break;
            }
            case "sliding": {
                KTable<Windowed<String>, Long> counts = lines.groupByKey()
                    .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(5), Duration.ofMillis(3)))
                    .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("sliding-counts")
                           .withKeySerde(Serdes.String()));  // suppress() needs the windowed key's serde
                counts.toStream()
                    .map((windowed, count) -> KeyValue.pair(
                        windowed.key() + "@" + windowed.window().start() + "/" + windowed.window().end(), count))
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
                // the final results: each window once, when it closes
                counts.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                    .toStream()
                    .map((windowed, count) -> KeyValue.pair(
                        windowed.key() + "@" + windowed.window().start() + "/" + windowed.window().end(), count))
                    .to(output + "-outer", Produced.with(Serdes.String(), Serdes.Long()));
                lines.groupByKey()
                    .windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(4)))
                    .reduce((joined, line) -> joined + "|" + line)
                    .toStream()
                    .map((windowed, joined) -> KeyValue.pair(
                        windowed.key() + "@" + windowed.window().start() + "/" + windowed.window().end(), joined))
                    .to(output + "-totals");
                break;
            }
            case "emit": {
                // KIP-825: hopping counts, sliding reductions and session counts emitted once, when their window
                // closes (on -totals and -outer); tumbling counts on every update (the default, asked for)
                lines.groupByKey()
                    .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(4), Duration.ofMillis(2))
                                .advanceBy(Duration.ofMillis(2)))
                    .emitStrategy(EmitStrategy.onWindowClose())
                    .count()
                    .toStream()
                    .map((windowed, count) -> KeyValue.pair(
                        windowed.key() + "@" + windowed.window().start() + "/" + windowed.window().end(), count))
                    .to(output + "-totals", Produced.with(Serdes.String(), Serdes.Long()));
                lines.groupByKey()
                    .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(5), Duration.ofMillis(3)))
                    .emitStrategy(EmitStrategy.onWindowClose())
                    .reduce((joined, line) -> joined + "|" + line, Materialized.as("sliding-lines"))
                    .toStream()
                    .map((windowed, joined) -> KeyValue.pair(
                        windowed.key() + "@" + windowed.window().start() + "/" + windowed.window().end(), joined))
                    .to(output + "-outer");
                lines.groupByKey()
                    .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(5)))
                    .emitStrategy(EmitStrategy.onWindowUpdate())
                    .count()
                    .toStream()
                    .map((windowed, count) -> KeyValue.pair(windowed.key() + "@" + windowed.window().start(), count))
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
                lines.groupByKey()
                    .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(3), Duration.ofMillis(2)))
                    .emitStrategy(EmitStrategy.onWindowClose())
                    .count(Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("final-sessions"))
                    .toStream()
                    .map((windowed, count) -> KeyValue.pair(
                        windowed.key() + "#" + windowed.window().start() + "-" + windowed.window().end(), count))
                    .to(output + "-outer", Produced.with(Serdes.String(), Serdes.Long()));
                break;
            }
            case "joins": {
                KTable<String, String> profiles = builder.table(input + "-profiles");
                lines.join(profiles, (line, profile) -> line + "/" + profile).to(output);
                lines.leftJoin(profiles, (line, profile) -> line + "/" + profile).to(output + "-totals");
                // a global table of the first words' meanings, joined by each line's first word
                GlobalKTable<String, String> words = builder.globalTable(input + "-words");
                lines.leftJoin(words, (key, line) -> line.split(" ")[0], (line, meaning) -> line + "=" + meaning)
                    .to(output + "-outer");
                break;
            }
            case "table-joins": {
                KTable<String, String> profiles = builder.table(input + "-profiles");
                KTable<String, String> scores = builder.table(input + "-scores");
                profiles.join(scores, (profile, score) -> profile + "+" + score).toStream().to(output);
                profiles.leftJoin(scores, (profile, score) -> profile + "+" + score).toStream().to(output + "-totals");
                profiles.outerJoin(scores, (profile, score) -> profile + "+" + score).toStream().to(output + "-outer");
                break;
            }
            case "fk-joins": {
                KTable<String, String> orders = builder.table(input + "-orders");
                KTable<String, String> customers = builder.table(input + "-customers");
                orders.join(customers, order -> order.split(":")[0], (order, customer) -> order + "+" + customer)
                    .toStream().to(output);
                orders.leftJoin(customers, order -> order.split(":")[0], (order, customer) -> order + "+" + customer)
                    .toStream().to(output + "-totals");
                break;
            }
            case "fk-named": {
                // the foreign-key joins named (TableJoined.as) and materialized
                KTable<String, String> orders = builder.table(input + "-orders");
                KTable<String, String> customers = builder.table(input + "-customers");
                orders.join(customers, order -> order.split(":")[0], (order, customer) -> order + "+" + customer,
                            TableJoined.as("orders-customers"))
                    .toStream().to(output);
                orders.leftJoin(customers, order -> order.split(":")[0], (order, customer) -> order + "+" + customer,
                                TableJoined.as("left-fk"),
                                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("fk-joined"))
                    .toStream().to(output + "-totals");
                orders.join(customers, order -> order.split(":")[0], (order, customer) -> customer + "/" + order,
                            Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("fk-unnamed-joined"))
                    .toStream().to(output + "-outer");
                break;
            }
            case "fk-partitioned": {
                // tables whose topics are partitioned by key length, not by the default partitioner: the
                // foreign-key join is told so for both (TableJoined.with)
                KTable<String, String> orders = builder.table(input + "-orders");
                KTable<String, String> customers = builder.table(input + "-customers");
                StreamPartitioner<String, Void> byLength =
                    (topic, key, value, partitions) -> Optional.of(Set.of(key.length() % partitions));
                orders.join(customers, order -> order.split(":")[0], (order, customer) -> order + "+" + customer,
                            TableJoined.with(byLength, byLength))
                    .toStream().to(output);
                break;
            }
            case "stream-joins": {
                KStream<String, String> clicks = builder.stream(input + "-clicks");
                lines.join(clicks, (line, click) -> line + "&" + click,
                           JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(3), Duration.ofMillis(2)))
                    .to(output);
                lines.leftJoin(clicks, (line, click) -> line + "&" + click,
                               JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(3), Duration.ofMillis(2)))
                    .to(output + "-totals");
                lines.outerJoin(clicks, (line, click) -> line + "&" + click,
                                JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(2), Duration.ofMillis(1)))
                    .to(output + "-outer");
                break;
            }
            case "split-unnamed": {
                Map<String, KStream<String, String>> branches = lines.split()
                    .branch((key, line) -> line.startsWith("a"))
                    .branch((key, line) -> line.startsWith("b"))
                    .defaultBranch();
                branches.values().forEach(branch -> branch.to(output));
                break;
            }
            case "split-prefix": {
                lines.split(Named.as("s-"))
                    .branch((key, line) -> line.startsWith("a"), Branched.withConsumer(branch -> branch.to(output)))
                    .branch((key, line) -> line.startsWith("b"))
                    .noDefaultBranch();
                break;
            }
            case "repartition": {
                lines.selectKey((key, line) -> line).repartition().groupByKey().count().toStream().to(output);
                lines.map((key, line) -> KeyValue.pair(line, key)).groupByKey().reduce((a, b) -> b).toStream()
                    .to(output);
                lines.repartition(Repartitioned.as("named")).foreach((key, line) -> { });
                break;
            }
            case "errors": {
                // an own builder: its source reads the values as Integers (the "lines" source reads Strings)
                StreamsBuilder numbers = new StreamsBuilder();
                numbers.stream(input, Consumed.with(Serdes.String(), Serdes.Integer()))
                    .mapValues(n -> {
                        if (n % 5 == 3) {
                            throw new IllegalArgumentException("no multiple of 5 plus 3: " + n);
                        }
                        return n * 10;
                    })
                    .mapValues(n -> n % 7 == 6 ? "x".repeat(20_000) : String.valueOf(n))
                    .to(output);
                return numbers.build();
            }
            default:
                throw new IllegalArgumentException("unknown topology " + name);
        }
        return builder.build();
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("describe")) {
            for (String topologyName : args[1].split(",")) {
                System.out.print("=== " + topologyName + "\n" + topology(topologyName, args[2], args[3]).describe());
            }
            return;
        }
        boolean expectError = args[1].endsWith("-fail");
        boolean deadLetterQueue = args[1].endsWith("-dlq");
        String name = expectError || deadLetterQueue ? args[1].substring(0, args[1].lastIndexOf('-')) : args[1];
        String bootstrap = args[2];
        String applicationId = args[3];
        String input = args[4];
        String output = args[5];
        int records = Integer.parseInt(args[8]);
        int totals = args.length > 9 ? Integer.parseInt(args[9]) : 0;
        Properties config = new Properties();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(StreamsConfig.STATE_DIR_CONFIG, args[6]);
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[7]);
        config.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        config.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, args.length > 10 ? Long.parseLong(args[10]) : 0L);
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args.length > 11 ? Long.parseLong(args[11]) : 100L);
        config.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // left/outer stream-stream joins emit their unjoined records on every record, as kfk.streams does (not at
        // most once a second by wall clock)
        config.put("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", 0L);
        // windowed aggregations emitting on window close look for closed windows after every record, as kfk.streams
        config.put("__emit.interval.ms.kstreams.windowed.aggregation__", 0L);
        config.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        if (name.equals("errors")) {
            config.put(StreamsConfig.producerPrefix(ProducerConfig.MAX_REQUEST_SIZE_CONFIG), 10_000);
            if (!expectError) {
                config.put(StreamsConfig.DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG,
                           LogAndContinueExceptionHandler.class);
                config.put(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_CLASS_CONFIG,
                           LogAndContinueProcessingExceptionHandler.class);
                config.put(StreamsConfig.PRODUCTION_EXCEPTION_HANDLER_CLASS_CONFIG, ContinueOnRecordTooLarge.class);
            }
            if (deadLetterQueue) {
                config.put(StreamsConfig.ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG, output + "-dlq");
                config.put(StreamsConfig.PRODUCTION_EXCEPTION_HANDLER_CLASS_CONFIG, DeadLetterOnRecordTooLarge.class);
            }
        }
        KafkaStreams streams = new KafkaStreams(topology(name, input, output), config);
        streams.start();
        if (expectError) {
            long until = System.currentTimeMillis() + 120_000;
            while (streams.state() != KafkaStreams.State.ERROR && System.currentTimeMillis() < until) {
                Thread.sleep(50);
            }
            KafkaStreams.State state = streams.state();
            streams.close(Duration.ofSeconds(30));
            System.out.println("{\"check\": \"run\", \"state\": \"" + state + "\"}");
            System.exit(state == KafkaStreams.State.ERROR ? 0 : 1);
        }
        Properties readerConfig = new Properties();
        readerConfig.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        readerConfig.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        readerConfig.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        readerConfig.put(ConsumerConfig.GROUP_ID_CONFIG, applicationId + "-reader");
        int seen = 0;
        int seenTotals = 0;
        long deadline = System.currentTimeMillis() + 120_000;
        try (KafkaConsumer<byte[], byte[]> reader = new KafkaConsumer<>(readerConfig, new ByteArrayDeserializer(),
                                                                        new ByteArrayDeserializer())) {
            reader.subscribe(totals > 0 ? List.of(output, output + "-totals") : List.of(output));
            while ((seen < records || seenTotals < totals) && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : reader.poll(Duration.ofMillis(200))) {
                    if (record.topic().equals(output)) {
                        seen++;
                    } else {
                        seenTotals++;
                    }
                }
            }
        }
        streams.close(Duration.ofSeconds(30));
        System.out.println("{\"check\": \"run\", \"records\": " + seen + ", \"state\": \"" + streams.state() + "\"}");
        System.exit(seen >= records && seenTotals >= totals ? 0 : 1);
    }
}
