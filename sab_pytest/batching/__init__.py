"""Requests through a provider's Batch API (``--sab-batch``): half the price, answered within a window.

Why a package of its own, beside ``models/``: batching is one concern (which requests wait for a
batch, the files and their limits, the journal that lets a stopped run collect its batches later)
that hooks into the model client at one point (``ChatClient.batching``), so the client stays
what it is and the hook can move with it. The modules: ``errors`` (the signal that parks a case,
the named failures), ``client`` (OpenAI's Batch API: files, submit, poll, collect; and ``BatchAPI``,
what the batcher needs of any provider's), ``anthropic_batches`` (Anthropic's Message Batches behind
the same interface), ``clients`` (which one a model's provider has),
``journal`` (the batches a run submitted, in its ``--sab-out``), ``batcher`` (a process's rounds:
gather, submit, wait, answer into the response cache).
"""
