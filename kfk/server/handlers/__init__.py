"""One module per API group. Each handler decodes nothing itself (dispatch did), calls the layer that owns the
work, and builds the response; each module opens with what differs between the versions it serves."""
