"""Who judged, and how well: the models that answered each role (``served``), the agreement of a judge
panel's models (``agreement``), and the judges' error measured by a human audit and corrected for: the
audit's draw, label files and report (``audit``), the statistics of a judge against people and of a
corrected rate (``error``), and the simulation that checks the corrected interval keeps its promise
(``simulation``)."""
