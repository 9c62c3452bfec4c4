"""Facts per domain: each a command plus a pure parser, golden-tested on real output."""
