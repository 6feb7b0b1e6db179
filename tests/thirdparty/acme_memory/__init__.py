"""A third-party memory provider, written as an outside author would write one: it knows
only ``nanobot_memory_adapters.provider`` (the authors' page), the contract and the base
adapter, and it is registered through its own distribution's entry point (see the
``acme_memory-0.1.0.dist-info`` next to it), never by this project's code."""
