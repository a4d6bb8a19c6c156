"""The rows of the readout table, one module per readout family; :mod:`badpo.readouts.table` lists them."""
