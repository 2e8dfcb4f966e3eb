"""kafka-storage format's --add-scram argument, read as Kafka 4.0's tool reads it: the forms it takes, its parsing
quirks, and every refusal with Kafka's message (each checked against Apache Kafka 4.0.2's tool by hand)."""

from __future__ import annotations

import base64

import pytest

from kfk.errors import InvalidConfigurationError
from kfk.security.sasl.add_scram import AddScramError, parse_add_scram
from kfk.security.sasl.scram import ScramMechanism, credential_from_password

SALT = "MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E="
SALTED_PASSWORD = "mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE="
#: What Apache Kafka 4.0.2's `kafka-storage format --add-scram 'SCRAM-SHA-512=[name=bob,iterations=8192,
#: salt="<SALT>",saltedpassword="<SALTED_PASSWORD>"]'` wrote into bootstrap.checkpoint (kafka-dump-log).
KAFKA_STORED_KEY = "OTJaI0xrVVArw2MNM35eGNVvo7ZObfdmB6j25TPoky/3TryBqVyDO+xwZ9ayp2b8vlAyTuh3zIGiJpXG5PlNBQ=="
KAFKA_SERVER_KEY = "SAFtavLze+JBSMhVmVxQOuH5mRkdsrE4CjtIl/LA+59pwoSC4fkJx8n+JnF+LKedPZWTai2bvkCoctFtn9zZxw=="


def test_a_password_is_salted_with_a_random_salt_at_4096_iterations() -> None:
    first = parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]")
    second = parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert (first.name, first.mechanism, first.credential.iterations) == ("alice", ScramMechanism.SCRAM_SHA_256, 4096)
    assert first.credential.salt != second.credential.salt
    assert first.credential == credential_from_password(ScramMechanism.SCRAM_SHA_256, "alice-secret", 4096,
                                                        first.credential.salt)


def test_a_salted_password_gives_the_keys_kafkas_tool_writes() -> None:
    argument = parse_add_scram(
        f'SCRAM-SHA-512=[name=bob,iterations=8192,salt="{SALT}",saltedpassword="{SALTED_PASSWORD}"]')
    assert (argument.name, argument.mechanism) == ("bob", ScramMechanism.SCRAM_SHA_512)
    credential = argument.credential
    assert credential.salt == base64.b64decode(SALT) and credential.iterations == 8192
    assert base64.b64encode(credential.stored_key).decode() == KAFKA_STORED_KEY
    assert base64.b64encode(credential.server_key).decode() == KAFKA_SERVER_KEY


def test_kafkas_parsing_quirks() -> None:
    # Trimmed around, a trailing comma dropped (Java's split), quotes around a value dropped, the last of a repeated
    # key kept, the password winning over a salted password, base64 without its padding.
    argument = parse_add_scram(' SCRAM-SHA-256=[name="carol",password=first,password=second,'
                               f'saltedpassword=ignored,salt={SALT.rstrip("=")},] ')
    assert argument.name == "carol"
    assert argument.credential == credential_from_password(ScramMechanism.SCRAM_SHA_256, "second", 4096,
                                                           base64.b64decode(SALT))


@pytest.mark.parametrize("argument,message", [
    ("SCRAM-SHA-256", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-256'"),
    ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
    ("SCRAM-SHA-256=name=a", "Expected configuration string to start with ["),
    ("SCRAM-SHA-256=[name=a,password=b", "Expected configuration string to end with ]"),
    ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-256=[,]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-256=[]", "No equals sign found in SCRAM component: "),
    ("SCRAM-SHA-256=[name=a,,password=b]", "No equals sign found in SCRAM component: "),
    ("SCRAM-SHA-256=[name=a,password]", "No equals sign found in SCRAM component: password"),
    ('SCRAM-SHA-256=[name=",",password=b]', 'No equals sign found in SCRAM component: "'),  # no quoting of commas
    ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a, password=b]", "You must supply one of 'password' or 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,saltedpassword=abc]", "You must supply 'salt' with 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,salt=AAAA,saltedpassword=!!]", "Failed to decode given saltedPassword: !!"),
    ("SCRAM-SHA-256=[name=a,password=b,salt=!!]", "Failed to decode given salt: !!"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=x]", "Failed to parse iterations count: x"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations= 5000]", "Failed to parse iterations count:  5000"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=100]",
     "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_256"),
    ("SCRAM-SHA-512=[name=a,password=b,iterations=100000]",
     "The 'iterations' value must be <= 16384 for add-scram using SCRAM_SHA_512"),
    ("SCRAM-SHA-256=[name=a,password=b,foo=1,bar=2]", "Unknown SCRAM configurations: bar, foo"),
])
def test_refusals_are_kafkas(argument: str, message: str) -> None:
    with pytest.raises(AddScramError) as refused:
        parse_add_scram(argument)
    assert refused.value.message == message
    assert isinstance(refused.value, InvalidConfigurationError)  # what `kfk storage format` reports in one line
