"""Distribution: devices, Lightning Fabric, ranks and the facts they gather, lost ranks, FSDP
sharding."""
