"""Who judged, and how well: the models that answered each role (``served``) and the agreement of a
judge panel's models (``agreement``)."""
