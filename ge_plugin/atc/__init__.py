"""ATC, the Ascend Tensor Compiler, as ge-plugin needs it: the command line that compiles a spec's OM on an
Ascend host (``command``), ATC's flags checked as ATC checks them (``flags``), and sim OMs built from those
flags for the CPU simulator (``simbuild``)."""
