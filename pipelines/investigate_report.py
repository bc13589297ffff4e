"""The window-level investigation (``investigation.json``, written by
:mod:`pipelines.investigate`) as Markdown, for the results page: rendered from
the file alone."""


def markdown(study, heading="###"):
    """The study as a Markdown table."""
    L = [f"{heading} Investigation: split functions at the window level", "",
         f"Held-out window accuracy (windows of every 4th training image held out; "
         f"{study['n_heldout_windows']} windows, classes balanced, chance 12.5%) of forests "
         f"of {study['trees']} trees × {study['samples_per_tree']} windows, depth "
         f"{study['max_depth']}, trained on the other {study['n_train_windows']} windows. "
         "No prior reweighting, no dense evaluation: this compares the split functions "
         "alone. Made by `python -m pipelines.investigate`.", "",
         "| forest | window accuracy | oblique splits | CO2 accepted / tried | fit time |",
         "| --- | ---: | ---: | ---: | ---: |"]
    for r in study["variants"]:
        acc = (f"{r['co2_accepted']} / {r['co2_calls']}" if r.get("co2_calls") else "–")
        L.append(f"| {r['label']} | {r['accuracy']:.2f}% | {r['n_oblique']} | {acc} | "
                 f"{r['fit_seconds']:.0f} s |")
    return "\n".join(L) + "\n"
