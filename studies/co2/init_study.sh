#!/usr/bin/env bash
# Dense test-set study of the CO2 forest's weak points on faces300w (README, "CO2 vs two-probe").
#
# Needs the models of `make all DATA=../shared/data/faces300w` (models/faces300w-default/) and
# their windows file. Trains two CO2 variants on the same windows and settings as the pipeline's
# CO2 forest (q = p^0.7, nu = 1, eta = 1e-3, depth 20, 64,000 windows per tree, min leaf 5):
#   co2-oms200-32        oblique splits down to nodes of 200 windows (the pipeline: 2000)
#   co2-best-oms200-32   the same, starting each node from the better of the best univariate and
#                        the best two-probe split (CO2Forest(init="best"), 400 pairs)
# then scores them with the pipeline's CO2 and two-probe forests on the first 40 test faces
# (all pixels, strict mode, alpha = 0.5 as selected on validation), at 16 and 32 trees.
# Output: reports/studies/co2-init/{summary.md,*.json}. About 25 minutes on 2 cores (training included).
set -euo pipefail
cd "$(dirname "$0")/../.."
FS=.venv/bin/facesegment
W=data/windows/faces300w-default/train.h5
COMMON=(--windows "$W" --max-depth 20 --min-samples-leaf 5 --max-samples 64000 --max-features p^0.7
        --nu 1 --eta 1e-3 --oblique-min-samples 200 --seed 0)
[ -d models/study/co2-oms200-32 ] || $FS train --kind co2 --trees 32 "${COMMON[@]}" --out models/study/co2-oms200-32
[ -d models/study/co2-best-oms200-32 ] || $FS train --kind co2-best --pairs 400 --trees 32 \
    "${COMMON[@]}" --out models/study/co2-best-oms200-32
$FS evaluate --model models/faces300w-default/co2-32 models/study/co2-oms200-32 \
    models/faces300w-default/two-probe-32 models/study/co2-best-oms200-32 \
    --data ../shared/data/faces300w --alpha 0.5 --sweep-trees 16 32 --limit 40 \
    --out reports/studies/co2-init
