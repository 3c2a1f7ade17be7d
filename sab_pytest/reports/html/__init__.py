"""The HTML report of a run and the page of ``compare``: ``report`` assembles the page from its
parts (``page`` the frame and escaping, ``plots`` the figures, ``cases`` the per-case views)."""
