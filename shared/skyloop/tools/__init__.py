"""Server-side tools: what an agent declares (:mod:`.declared`), the set a turn offers the model
(:mod:`.catalog`), and how each kind runs (:mod:`.mcp_client`; Lambda tools are invoked by the
turn's state machine itself, see ``infra/turn.asl.json``'s ``RunTools``)."""
