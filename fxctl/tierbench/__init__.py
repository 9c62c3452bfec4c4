"""The tier disk bench: fxctl's KV tier against LMCache's L2 adapters and the fio ceiling, one timer for all."""
