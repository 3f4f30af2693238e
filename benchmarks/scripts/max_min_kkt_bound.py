"""An exact MIP for "some allocation on max-min fairness's level face gives every job at least
TARGET of the time", as a bound for sizing under the policy (an experiment; results/planning.md).

The level LP (max t: every job's score >= t, time <= 1, workers per type) is written through its
optimality conditions: primal rows with the purchase in the capacity and in the references
(``tau = t / total workers`` times the purchase's binary digits, McCormick, exact), dual rows
normalised by sum(lambda) = 1 (the objective's multiplier is then free and positive), and
complementary slackness by big-M with a binary per pair. Every big-M is a bound any KKT point
keeps: lambda <= 1, mu_m <= s_m max_j T_mj, pi_j <= max_m T_mj (from the reduced costs of a
column in use). Minimising the purchase's cost over it bounds below the cheapest purchase under
which the policy's own plan (on the refined face, inside the level face) meets the target.

    python benchmarks/scripts/max_min_kkt_bound.py examples/inventory-30-jobs.json 0.5 \
        v100=40,p100=40,k80=40 - 60
"""
import sys
import time

import highspy
import numpy as np
import scipy.sparse as sp

import fleetplan

path, target = sys.argv[1], float(sys.argv[2])
buy = dict(item.split("=") for item in sys.argv[3].split(","))  # type=max
fix = None
if len(sys.argv) > 4 and sys.argv[4] != "-":
    fix = {k: int(v) for k, v in (item.split("=") for item in sys.argv[4].split(","))}
limit = float(sys.argv[5]) if len(sys.argv) > 5 else 120

inst = fleetplan.load_instance(path)
ar = inst.arrays()
T = ar.throughput
s = ar.scale_factor
w = ar.weight
W = ar.num_workers
cost = ar.cost_per_hour
types = list(ar.worker_types)
n, K = T.shape
MAX = np.array([int(buy.get(t, 0)) for t in types])
run = (T > 0) & (s[:, None] <= W[None, :])
assert ((T > 0) & ~run).sum() == 0, "runnability changes with purchases: not modelled"
bits = [int(np.ceil(np.log2(m + 1))) if m > 0 else 0 for m in MAX]

cols = []  # (name, lo, hi, integer, cost)


def col(lo, hi, integer=False, c=0.0):
    cols.append((lo, hi, integer, c))
    return len(cols) - 1


a_bits = {j: [col(0, 1, True) for _ in range(bits[j])] for j in range(K)}
R0 = T @ W  # R_m(0)
tau_max = float(np.min(s * T.max(axis=1) / (w * R0)))
tau = col(0, tau_max)
y = {j: [col(0, tau_max) for _ in range(bits[j])] for j in range(K)}
mi, ji = np.nonzero(run)
x = {(m, j): col(0, 1) for m, j in zip(mi, ji, strict=False)}
lam = [col(0, 1) for m in range(n)]
Tmax_m = T.max(axis=1)
Tmax_j = T.max(axis=0)
mu = [col(0, s[m] * Tmax_m[m]) for m in range(n)]
pi = [col(0, Tmax_j[j]) for j in range(K)]
bx = {(m, j): col(0, 1, True) for m, j in zip(mi, ji, strict=False)}
bl = [col(0, 1, True) for m in range(n)]
bm = [col(0, 1, True) for m in range(n)]
bp = [col(0, 1, True) for j in range(K)]

rows = []  # (dict col->coef, lo, hi)


def row(coefs, lo, hi):
    rows.append((coefs, lo, hi))


def a_terms(j, scale=1.0):
    return {c: scale * 2 ** b for b, c in enumerate(a_bits[j])}


for j in range(K):
    if bits[j]:
        row(a_terms(j), 0, MAX[j])
        for zc, yc in zip(a_bits[j], y[j], strict=True):
            row({yc: 1, zc: -tau_max}, -np.inf, 0)
            row({yc: 1, tau: -1}, -np.inf, 0)
            row({yc: 1, tau: -1, zc: -tau_max}, -tau_max, np.inf)
INF = np.inf
for m in range(n):
    ML = s[m] * Tmax_m[m]
    # slack_L = s sum T x - w tau R0 - w sum_j T_mj sum_b 2^b y_jb  >= 0 and <= ML (1 - bl)
    coefs = {x[m, j]: s[m] * T[m, j] for j in range(K) if run[m, j]}
    coefs[tau] = -w[m] * R0[m]
    for j in range(K):
        for b, yc in enumerate(y[j]):
            coefs[yc] = coefs.get(yc, 0) - w[m] * T[m, j] * 2 ** b
    row(coefs, 0, INF)
    c2 = dict(coefs)
    c2[bl[m]] = ML
    row(c2, -INF, ML)
    row({lam[m]: 1, bl[m]: -1}, -INF, 0)
    # U: target <= sum x <= 1; mu <= M bm; 1 - sum x <= 1 - bm  => sum x - bm >= 0
    share = {x[m, j]: 1 for j in range(K) if run[m, j]}
    row(share, target, 1)
    row({**share, bm[m]: -1}, 0, INF)
    row({mu[m]: 1, bm[m]: -s[m] * Tmax_m[m]}, -INF, 0)
    for j in range(K):
        if not run[m, j]:
            continue
        Mrc = s[m] * Tmax_m[m] + s[m] * Tmax_j[j]
        rc = {lam[m]: -s[m] * T[m, j], mu[m]: 1, pi[j]: s[m]}
        row(rc, 0, INF)
        row({**rc, bx[m, j]: Mrc}, -INF, Mrc)
        row({x[m, j]: 1, bx[m, j]: -1}, -INF, 0)
row({c: 1 for c in lam}, 1, 1)
for j in range(K):
    MC = W[j] + MAX[j]
    usage = {x[m, j]: -s[m] for m in range(n) if run[m, j]}
    # slack_C = W + a - sum s x >= 0 ; <= MC (1 - bp)
    sl = {**usage, **a_terms(j)}
    row(sl, -W[j], INF)
    row({**sl, bp[j]: MC}, -INF, MC - W[j])
    row({pi[j]: 1, bp[j]: -Tmax_j[j]}, -INF, 0)
    if fix is not None:
        row(a_terms(j), fix.get(types[j], 0), fix.get(types[j], 0))

obj = np.zeros(len(cols))
for j in range(K):
    for c, v in a_terms(j, cost[j]).items():
        obj[c] += v
r_i, c_i, vals = [], [], []
for i, (coefs, _lo, _hi) in enumerate(rows):
    for c, v in coefs.items():
        r_i.append(i)
        c_i.append(c)
        vals.append(v)
A = sp.csc_matrix((vals, (r_i, c_i)), shape=(len(rows), len(cols)))
lp = highspy.HighsLp()
lp.num_col_, lp.num_row_ = len(cols), len(rows)
lp.col_cost_ = obj
lp.col_lower_ = np.array([c[0] for c in cols], float)
lp.col_upper_ = np.array([c[1] for c in cols], float)
lp.row_lower_ = np.array([r[1] for r in rows], float)
lp.row_upper_ = np.array([r[2] for r in rows], float)
lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
lp.a_matrix_.start_ = A.indptr
lp.a_matrix_.index_ = A.indices
lp.a_matrix_.value_ = A.data
lp.integrality_ = [highspy.HighsVarType.kInteger if c[2] else highspy.HighsVarType.kContinuous for c in cols]
h = highspy.Highs()
h.setOptionValue("output_flag", True)
h.setOptionValue("time_limit", limit)
h.setOptionValue("threads", 1)
h.setOptionValue("mip_rel_gap", 1e-4)
h.passModel(lp)
print(f"{len(cols)} cols, {len(rows)} rows, tau_max {tau_max:.3g}", flush=True)
start = time.process_time()
h.run()
info = h.getInfo()
print("status", h.modelStatusToString(h.getModelStatus()), "obj", info.objective_function_value,
      "bound", info.mip_dual_bound, "cpu", round(time.process_time() - start, 1))
if h.getModelStatus() in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kTimeLimit):
    sol = np.array(h.getSolution().col_value)
    if sol.size:
        buyv = [int(round(sum(2 ** b * sol[c] for b, c in enumerate(a_bits[j])))) for j in range(K)]
        print("purchase", dict(zip(types, buyv, strict=False)))
