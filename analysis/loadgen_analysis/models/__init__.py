"""Capacity models fitted to a sweep's small frames: Little's Law (:mod:`.littles_law`), the
Universal Scalability Law (:mod:`.usl`) and the asymptotic bounds (:mod:`.bounds`). They read
reductions; they never read records.
"""
