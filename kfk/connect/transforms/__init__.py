"""Single message transforms (org.apache.kafka.connect.transforms) and predicates.

A connector's `transforms=a,b` runs `transforms.a.type` then `transforms.b.type` on each record (a source
record before conversion, a sink record after); `transforms.a.predicate=p` with `predicates.p.type` applies `a`
only to the records `p` matches (or does not match, with `transforms.a.negate=true`). A transform returning None
drops the record. Those with a key and a value form (InsertField$Key / InsertField$Value) are one class here with
the part given at construction (base.KeyOrValue).
"""
