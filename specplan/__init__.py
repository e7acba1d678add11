"""specplan: plan, prove and run rank agreement for speculative decoding on many GPUs."""

__version__ = "0.1.0"
