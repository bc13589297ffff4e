"""The main job of facesegment (``make all``): stages driven by one TOML config.

``python -m pipelines.run --config pipelines/config.toml [--data DIR] STAGE``
runs the stages data -> extract -> select -> train -> evaluate -> time ->
figures -> report on the stage runner the harnesses share
(``pipelines/runner.py``).  Each stage writes its outputs atomically plus a
small stamp (``.stamp.json``); a stage whose stamp matches its configuration
and inputs is skipped.  See docs/pipeline.md.
"""

STAGES = ("data", "extract", "select", "train", "evaluate", "time", "figures", "report")
