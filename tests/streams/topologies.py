"""The topologies of tests/streams/java/StreamsOracle.java written with kfk.streams, operator for operator, so that
the tests compare Apache Kafka Streams' and kfk.streams' descriptions and outputs."""

from __future__ import annotations

from kfk.streams import (Branched, BufferConfig, EmitStrategy, JoinWindows, Serdes, SessionWindows, SlidingWindows,
                         StreamsBuilder, Suppressed, TableJoined, TimeWindows, Topology)


def stateless(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    lines = builder.stream(input_topic)
    words = (lines.filter_not(lambda key, line: line is None or line == "")
             .flat_map_values(lambda line: line.lower().split(" "))
             .peek(lambda key, word: None))
    branches = (words.split("by-length-")
                .branch(lambda key, word: len(word) > 3, Branched("long"))
                .default_branch(Branched("short")))
    (branches["by-length-long"].map_values(str.upper)
     .merge(branches["by-length-short"].map(lambda key, word: (word, f"{key}:{word}")))
     .filter(lambda key, value: not value.startswith("x"))
     .select_key(lambda key, value: value[0])
     .to(output))
    return builder.build()


def wordcount(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    (builder.stream(input_topic)
     .flat_map_values(lambda line: line.lower().split(" "))
     .group_by(lambda key, word: word)
     .count("counts")
     .to_stream()
     .to(output, key_serde=Serdes.string(), value_serde=Serdes.long()))
    return builder.build()


def table(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    lines = builder.stream(input_topic)
    longest = lines.group_by_key().reduce(lambda previous, line: line if len(line) >= len(previous) else previous)
    (longest.filter(lambda key, line: len(line) > 2)
     .map_values(lambda line: f"{line}/{len(line)}")
     .to_stream()
     .to(output))
    (lines.map_values(len).group_by_key()
     .aggregate(lambda: 0, lambda key, length, total: total + length, value_serde=Serdes.long())
     .to_stream().to(output + "-totals", key_serde=Serdes.string(), value_serde=Serdes.long()))
    return builder.build()


def windowed(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    lines = builder.stream(input_topic)
    counts = lines.group_by_key().windowed_by(TimeWindows.of_size_and_grace(4, 2).advance_by(2)).count(
        "windowed-counts")
    (counts.to_stream()
     .map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}/{windowed.window.end}", count))
     .to(output, key_serde=Serdes.string(), value_serde=Serdes.long()))
    joined_lines = (lines.group_by_key()
                    .windowed_by(TimeWindows.of_size_with_no_grace(5))
                    .reduce(lambda joined, line: f"{joined}|{line}"))
    (joined_lines.to_stream()
     .map(lambda windowed, joined: (f"{windowed.key}@{windowed.window.start}", joined))
     .to(output + "-totals"))
    # the final results: each window once, when it closes
    (counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}/{windowed.window.end}", count))
     .to(output + "-outer", key_serde=Serdes.string(), value_serde=Serdes.long()))
    (joined_lines.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final-lines"))
     .to_stream()
     .map(lambda windowed, joined: (f"{windowed.key}@{windowed.window.start}", joined))
     .to(output + "-outer", key_serde=Serdes.string(), value_serde=Serdes.string()))
    sessions = lines.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(3, 2)).count("sessions")
    (sessions.to_stream()
     .map(lambda windowed, count: (f"{windowed.key}#{windowed.window.start}-{windowed.window.end}", count))
     .to(output + "-outer", key_serde=Serdes.string(), value_serde=Serdes.long()))
    (sessions.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .map(lambda windowed, count: (f"{windowed.key}${windowed.window.start}-{windowed.window.end}", count))
     .to(output + "-outer", key_serde=Serdes.string(), value_serde=Serdes.long()))
    return builder.build()


def sliding(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    lines = builder.stream(input_topic)
    counts = lines.group_by_key().windowed_by(SlidingWindows.of_time_difference_and_grace(5, 3)).count(
        "sliding-counts")
    (counts.to_stream()
     .map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}/{windowed.window.end}", count))
     .to(output, key_serde=Serdes.string(), value_serde=Serdes.long()))
    # the final results: each window once, when it closes
    (counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}/{windowed.window.end}", count))
     .to(output + "-outer", key_serde=Serdes.string(), value_serde=Serdes.long()))
    (lines.group_by_key().windowed_by(SlidingWindows.of_time_difference_with_no_grace(4))
     .reduce(lambda joined, line: f"{joined}|{line}")
     .to_stream()
     .map(lambda windowed, joined: (f"{windowed.key}@{windowed.window.start}/{windowed.window.end}", joined))
     .to(output + "-totals"))
    return builder.build()


def emit(input_topic: str, output: str) -> Topology:
    """KIP-825: hopping counts, sliding reductions and session counts emitted once, when their window closes (on
    -totals and -outer); tumbling counts on every update (the default, asked for; on the output, whose last record
    comes after the last window closed)."""
    builder = StreamsBuilder()
    lines = builder.stream(input_topic)
    (lines.group_by_key().windowed_by(TimeWindows.of_size_and_grace(4, 2).advance_by(2))
     .emit_strategy(EmitStrategy.on_window_close())
     .count()
     .to_stream()
     .map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}/{windowed.window.end}", count))
     .to(output + "-totals", key_serde=Serdes.string(), value_serde=Serdes.long()))
    (lines.group_by_key().windowed_by(SlidingWindows.of_time_difference_and_grace(5, 3))
     .emit_strategy(EmitStrategy.on_window_close())
     .reduce(lambda joined, line: f"{joined}|{line}", "sliding-lines")
     .to_stream()
     .map(lambda windowed, joined: (f"{windowed.key}@{windowed.window.start}/{windowed.window.end}", joined))
     .to(output + "-outer"))
    (lines.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(5))
     .emit_strategy(EmitStrategy.on_window_update())
     .count()
     .to_stream()
     .map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}", count))
     .to(output, key_serde=Serdes.string(), value_serde=Serdes.long()))
    (lines.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(3, 2))
     .emit_strategy(EmitStrategy.on_window_close())
     .count("final-sessions")
     .to_stream()
     .map(lambda windowed, count: (f"{windowed.key}#{windowed.window.start}-{windowed.window.end}", count))
     .to(output + "-outer", key_serde=Serdes.string(), value_serde=Serdes.long()))
    return builder.build()


def joins(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    lines = builder.stream(input_topic)
    profiles = builder.table(input_topic + "-profiles")
    lines.join(profiles, lambda line, profile: f"{line}/{profile}").to(output)
    # Java's string concatenation writes a null as "null"
    lines.left_join(profiles, lambda line, profile: f"{line}/{'null' if profile is None else profile}").to(
        output + "-totals")
    # a global table of the first words' meanings, joined by each line's first word
    words = builder.global_table(input_topic + "-words")
    lines.left_join(words, lambda key, line: line.split(" ")[0],
                    lambda line, meaning: f"{line}={'null' if meaning is None else meaning}").to(output + "-outer")
    return builder.build()


def _java_concat(left: object, right: object) -> str:
    """Java's `left + "+" + right` on strings: a null is written "null"."""
    return f"{'null' if left is None else left}+{'null' if right is None else right}"


def table_joins(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    builder.stream(input_topic)
    profiles = builder.table(input_topic + "-profiles")
    scores = builder.table(input_topic + "-scores")
    profiles.join(scores, _java_concat).to_stream().to(output)
    profiles.left_join(scores, _java_concat).to_stream().to(output + "-totals")
    profiles.outer_join(scores, _java_concat).to_stream().to(output + "-outer")
    return builder.build()


def foreign_key_joins(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    builder.stream(input_topic)
    orders = builder.table(input_topic + "-orders")
    customers = builder.table(input_topic + "-customers")
    orders.join(customers, lambda order: order.split(":")[0], _java_concat).to_stream().to(output)
    orders.left_join(customers, lambda order: order.split(":")[0], _java_concat).to_stream().to(output + "-totals")
    return builder.build()


def foreign_key_joins_named(input_topic: str, output: str) -> Topology:
    """The foreign-key joins named (TableJoined.as_) and materialized: the inner join named, the left join named
    and materialized, an unnamed inner join materialized."""
    builder = StreamsBuilder()
    builder.stream(input_topic)
    orders = builder.table(input_topic + "-orders")
    customers = builder.table(input_topic + "-customers")
    orders.join(customers, lambda order: order.split(":")[0], _java_concat,
                table_joined=TableJoined.as_("orders-customers")).to_stream().to(output)
    orders.left_join(customers, lambda order: order.split(":")[0], _java_concat,
                     table_joined=TableJoined.as_("left-fk"), materialized="fk-joined").to_stream().to(
        output + "-totals")
    orders.join(customers, lambda order: order.split(":")[0], lambda order, customer: f"{customer}/{order}",
                materialized="fk-unnamed-joined").to_stream().to(output + "-outer")
    return builder.build()


def _by_length(topic: str, key: str, value: None, partitions: int) -> int:
    """The partitioner of the "fk-partitioned" topology's tables: by key length."""
    return len(key) % partitions


def foreign_key_joins_partitioned(input_topic: str, output: str) -> Topology:
    """Tables whose topics are partitioned by key length, not by the default partitioner: the foreign-key join is
    told so for both (TableJoined.with_)."""
    builder = StreamsBuilder()
    builder.stream(input_topic)
    orders = builder.table(input_topic + "-orders")
    customers = builder.table(input_topic + "-customers")
    orders.join(customers, lambda order: order.split(":")[0], _java_concat,
                table_joined=TableJoined.with_(_by_length, _by_length)).to_stream().to(output)
    return builder.build()


def stream_joins(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    lines = builder.stream(input_topic)
    clicks = builder.stream(input_topic + "-clicks")
    lines.join(clicks, lambda line, click: f"{line}&{click}",
               JoinWindows.of_time_difference_and_grace(3, 2)).to(output)
    lines.left_join(clicks, _java_concat_amp, JoinWindows.of_time_difference_and_grace(3, 2)).to(output + "-totals")
    lines.outer_join(clicks, _java_concat_amp, JoinWindows.of_time_difference_and_grace(2, 1)).to(output + "-outer")
    return builder.build()


def _java_concat_amp(left: object, right: object) -> str:
    """Java's `left + "&" + right` on strings: a null is written "null"."""
    return f"{'null' if left is None else left}&{'null' if right is None else right}"


def split_unnamed(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    branches = (builder.stream(input_topic).split()
                .branch(lambda key, line: line.startswith("a"))
                .branch(lambda key, line: line.startswith("b"))
                .default_branch())
    for name in ("KSTREAM-BRANCH-00000000012", "KSTREAM-BRANCH-00000000010", "KSTREAM-BRANCH-00000000011"):
        branches[name].to(output)  # the order Java's HashMap iterates the branches in
    return builder.build()


def split_prefix(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    (builder.stream(input_topic).split("s-")
     .branch(lambda key, line: line.startswith("a"), Branched(consumer=lambda branch: branch.to(output)))
     .branch(lambda key, line: line.startswith("b"))
     .no_default_branch())
    return builder.build()


def repartition(input_topic: str, output: str) -> Topology:
    builder = StreamsBuilder()
    lines = builder.stream(input_topic)
    lines.select_key(lambda key, line: line).repartition().group_by_key().count().to_stream().to(output)
    lines.map(lambda key, line: (line, key)).group_by_key().reduce(lambda a, b: b).to_stream().to(output)
    lines.repartition("named").foreach(lambda key, line: None)
    return builder.build()


def _tenfold(number: int) -> int:
    """The "errors" topology's processing step, which raises on some values (as the Java one throws)."""
    if number % 5 == 3:
        raise ValueError(f"no multiple of 5 plus 3: {number}")
    return number * 10


def errors(input_topic: str, output: str) -> Topology:
    """Integers read with the Integer serde (values of another size fail to deserialize), a step raising on some,
    and a value too large for the producer's max.request.size on others: one failure for each exception handler."""
    builder = StreamsBuilder()
    (builder.stream(input_topic, key_serde=Serdes.string(), value_serde=Serdes.integer())
     .map_values(_tenfold)
     .map_values(lambda number: "x" * 20_000 if number % 7 == 6 else str(number))
     .to(output))
    return builder.build()


TOPOLOGIES = {"stateless": stateless, "wordcount": wordcount, "table": table, "windowed": windowed, "sliding": sliding,
              "emit": emit, "joins": joins, "table-joins": table_joins, "fk-joins": foreign_key_joins,
              "fk-named": foreign_key_joins_named, "fk-partitioned": foreign_key_joins_partitioned,
              "stream-joins": stream_joins, "split-unnamed": split_unnamed, "split-prefix": split_prefix,
              "repartition": repartition, "errors": errors}
