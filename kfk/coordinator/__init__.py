"""Coordinators: state machines that keep their state in internal compacted topics."""
