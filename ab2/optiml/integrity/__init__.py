"""Keeping results honest: static screening of candidates (:mod:`.screen`, policy in :mod:`.rules`)
and the isolated launch of the GPU worker (:mod:`.sandbox`, :mod:`.jail`). See ``docs/integrity.md``."""
