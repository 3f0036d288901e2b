"""`servescope demo`: the whole stack on one machine, on a simulated fleet."""
