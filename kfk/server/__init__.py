"""The broker process: network and dispatch (DESIGN.md); server/broker.py composes the layers below it."""
