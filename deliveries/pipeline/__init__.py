"""The sending pipeline, stage by stage (see the design page): emit, fan-out,
wake, the endpoint's owner (lease, gate, claim, lanes), the message on the wire,
record, sweep and purge."""
