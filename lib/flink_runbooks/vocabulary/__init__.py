"""Flink's own vocabulary, apart from any judgement: its releases (:mod:`.versions`), the wording of its messages per
release (:mod:`.wordings`), the lines it logs when jobs, tasks and checkpoints change state (:mod:`.lifecycle`), its
configuration keys and their renames (:mod:`.keys`), the options each release declares (:mod:`.options`) and its
units (:mod:`.units`). Nothing here imports another part of the package."""
