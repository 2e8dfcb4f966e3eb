"""kfk.commands.java_text decodes bytes as Java's `new String(bytes, UTF_8)` does, checked against a real JVM.

Every sequence of one to three bytes drawn from the bytes where UTF-8 decoders disagree (leads, the edges of the
continuation ranges, encoded surrogates, bytes no UTF-8 sequence uses), and seeded random ones, go to Java; its
answer is compared, UTF-16 code unit by code unit, with java_utf8's.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from kfk.commands.java_text import REPLACEMENT, java_utf8
from kfk.testing.apache_kafka import compile_java, run_java

EDGE_BYTES = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF,
              0xF0, 0xF1, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF]

JAVA_DECODER = """
import java.io.*;
import java.nio.charset.StandardCharsets;

public class JavaUtf8 {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; out.append('\\n')) {
            byte[] bytes = new byte[line.length() / 2];
            for (int i = 0; i < bytes.length; i++)
                bytes[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
            String text = new String(bytes, StandardCharsets.UTF_8);
            for (int i = 0; i < text.length(); i++) out.append(String.format("%04x", (int) text.charAt(i)));
        }
        System.out.print(out);
    }
}
"""


def test_known_differences_from_pythons_decoder() -> None:
    assert java_utf8(b"-N\xed\xb15") == f"-N{REPLACEMENT}5"  # Python: two replacements
    assert java_utf8(b"\xed\xa0\x80x") == f"{REPLACEMENT}x"  # an encoded surrogate is one replacement
    assert java_utf8("kafka ☕ 𝄞".encode()) == "kafka ☕ 𝄞"


def test_java_utf8_is_javas_new_string(tmp_path: Path) -> None:
    source = tmp_path / "JavaUtf8.java"
    source.write_text(JAVA_DECODER)
    classes = compile_java(source, classpath="")
    generator = random.Random(20)
    inputs = [bytes(combination) for length in (1, 2, 3) for combination in itertools.product(EDGE_BYTES,
                                                                                              repeat=length)]
    inputs += [bytes(generator.choice(EDGE_BYTES) if generator.random() < 0.7 else generator.randrange(256)
                     for _ in range(generator.randrange(1, 16))) for _ in range(20_000)]
    result = run_java("JavaUtf8", [], classpath="", extra_classpath=[classes],
                      input="".join(data.hex() + "\n" for data in inputs))
    assert result.returncode == 0, result.stderr[-2000:]
    java = result.stdout.split("\n")[:-1]
    assert len(java) == len(inputs)
    differences = [f"{data.hex(' ')}: Java {expected}, kfk {java_utf8(data).encode('utf-16-be').hex()}"
                   for data, expected in zip(inputs, java) if java_utf8(data).encode("utf-16-be").hex() != expected]
    assert not differences, "\n".join(differences[:20])
