"""The RoCEv2 baseline stack: RC queue pairs over UDP 4791 with go-back-N (or IRN-style
selective repeat), DCQCN and per-QP ECMP, sans-IO like the PDS (docs/roce.md)."""
