"""autosp.lowering: the partitioned sp/torch module lowered to what runs: the host program."""
