#!/usr/bin/env python3
"""Writes the seed corpora of the totality fuzz targets (fuzz/engine_fuzz.h).

Each seed is the byte layout the targets decode: dataset header, the
target's parameters, then the rows. Doubles and floats are written raw
(selector 255 + little-endian bytes). Rerun after changing the decoder:
    python3 fuzz/corpus/make_seeds.py
The known bad cases of issue 23 are seeds here, so the smoke run replays
each of them on every CI run.
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

ADD_REMOVE, REPLACE_ONE = 0, 1
DELTA_1E5, DELTA_1E2 = 0, 1
# kBounds indices of ReadDatasetHeader.
UNIT, AGE, WIDE = 0, 1, 2


def d(value):
    return b"\xff" + struct.pack("<d", value)


def f(value):
    return b"\xff" + struct.pack("<f", value)


def b(*values):
    return bytes(values)


def count(n):
    """FuzzInput::Count for a small count 1..64 or 0."""
    return b(0) if n == 0 else b(5 + n - 1)


def header(relation=ADD_REMOVE, delta=DELTA_1E5, numerics=((UNIT, 0),), cats=(3,), label=2,
           n=20):
    out = b(relation, delta, len(numerics), len(cats), label)
    for bounds, bins in numerics:
        out += b(bounds, bins)
    for levels in cats:
        out += b(levels - 1, 0)
    return out + b(n - 1), (len(numerics), len(cats), label, n)


def rows(shape, seed=1):
    numerics, cats, label, n = shape
    rng = random.Random(seed)
    out = b""
    for _ in range(n):
        for _ in range(numerics):
            cell = rng.randrange(5)
            out += b(cell)
            if cell == 3:
                out += b(rng.randrange(256))
        for _ in range(cats):
            out += b(rng.randrange(256))
        if label:
            out += b(rng.randrange(256))
    return out


def privacy(epsilon=None, noise_multiplier=None):
    if epsilon is not None:
        return b(0) + d(epsilon)
    if noise_multiplier is not None:
        return b(1) + d(noise_multiplier)
    return b(2)


def session(steps_index=2, q=0.5, epsilon=None, noise_multiplier=1.0):
    out = b(steps_index) + d(q)
    if epsilon is not None:
        return out + b(0) + d(epsilon)
    return out + b(1) + d(noise_multiplier)


def pattern(palette, mode=0, seed=1, stride=1):
    out = b(len(palette) - 1)
    for v in palette:
        out += f(v)
    return out + b(mode, seed, stride - 1)


def write(target, name, data):
    folder = os.path.join(HERE, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as out:
        out.write(data)


def rff_params(k=16, length_scale=None, numeric_weight=None, seed=1, noise_seed=1):
    out = count(k)
    out += b(1) + d(length_scale) if length_scale is not None else b(0)
    out += b(1) + d(numeric_weight) if numeric_weight is not None else b(0)
    return out + b(seed, noise_seed)


def release_rff():
    h, s = header()
    write("release_rff", "valid_epsilon", h + privacy(epsilon=1.0) + rff_params() + rows(s))
    h, s = header(relation=REPLACE_ONE, numerics=((AGE, 2), (WIDE, 0)), n=40)
    write("release_rff", "valid_replace_one",
          h + privacy(noise_multiplier=2.0) + rff_params(k=32, numeric_weight=0.7) + rows(s, 2))
    # Issue 23: admitted, then "noise scale outside the range" after the read.
    h, s = header()
    write("release_rff", "noise_multiplier_1e30",
          h + privacy(noise_multiplier=1e30) + rff_params() + rows(s))
    write("release_rff", "noise_multiplier_1e100",
          h + privacy(noise_multiplier=1e100) + rff_params() + rows(s))
    h, s = header(n=3)
    write("release_rff", "max_frequencies", h + privacy(epsilon=0.5) + b(1) + b(0, 0, 7, 7) +
          rows(s))


def charfn_params(k=16, length_scale=None, private=False, numeric_length_scale=None, seed=1,
                  noise_seed=1):
    out = count(k)
    out += b(1) + d(length_scale) if length_scale is not None else b(0)
    out += b(1 if private else 0)
    if numeric_length_scale is None:
        out += b(0)
    else:
        out += b(1, 1) + d(numeric_length_scale)
    return out + b(seed, noise_seed)


def release_charfn():
    h, s = header()
    write("release_charfn", "valid_declared",
          h + privacy(epsilon=1.0) + charfn_params(length_scale=0.5) + rows(s))
    h, s = header(numerics=((AGE, 0), (UNIT, 0)), n=30)
    write("release_charfn", "valid_private",
          h + privacy(epsilon=1.0) + charfn_params(private=True) + rows(s, 3))
    # Issue 23: a private length-scale with these multipliers failed after
    # the read ("noise scale outside the range").
    write("release_charfn", "private_noise_multiplier_1e200",
          h + privacy(noise_multiplier=1e200) + charfn_params(private=True) + rows(s, 3))
    write("release_charfn", "private_noise_multiplier_1e300",
          h + privacy(noise_multiplier=1e300) + charfn_params(private=True) + rows(s, 3))
    # Issue 23: n = 1 under REPLACE_ONE ("public dataset size n must be at
    # least 2") after the read.
    h, s = header(relation=REPLACE_ONE, n=1)
    write("release_charfn", "private_replace_one_n1",
          h + privacy(epsilon=1.0) + charfn_params(private=True) + rows(s, 4))


def release_mst():
    h, s = header(numerics=((AGE, 3), (UNIT, 1)), cats=(3,), label=2, n=40)
    write("release_mst", "valid_epsilon_1", h + privacy(epsilon=1.0) + b(1) + rows(s))
    h, s = header(relation=REPLACE_ONE, numerics=((WIDE, 2),), cats=(4, 2), label=3, n=25)
    write("release_mst", "valid_replace_one", h + privacy(epsilon=0.3) + b(2) + rows(s, 5))
    write("release_mst", "epsilon_1e-6", h + privacy(epsilon=1e-6) + b(3) + rows(s, 5))
    write("release_mst", "epsilon_1e6", h + privacy(epsilon=1e6) + b(4) + rows(s, 5))
    write("release_mst", "epsilon_1e300", h + privacy(epsilon=1e300) + b(6) + rows(s, 5))
    write("release_mst", "epsilon_denormal", h + privacy(epsilon=5e-324) + b(7) + rows(s, 5))
    h, s = header(numerics=(), cats=(2,), label=2, n=1)
    write("release_mst", "one_row", h + privacy(epsilon=1.0) + b(5) + rows(s, 6))
    # Found by the smoke run: at delta 1e-12 a tiny epsilon is admitted and
    # the one-way Gaussian's s * Delta is off the noise grid after the read.
    h, s = header(delta=3, numerics=(), cats=(2,), label=2, n=1)
    write("release_mst", "epsilon_5e-143_delta_1e-12",
          h + privacy(epsilon=5.4941909356181673e-143) + b(0) + rows(s, 6))


def release_marginals():
    # partition byte (bit 0 by "y", bit 1 mask byte follows, bit 2 by "c0"),
    # cliques (count, then size and column bytes), then the noise seed byte.
    h, s = header(numerics=((AGE, 3), (UNIT, 1)), cats=(3,), label=2, n=40)
    write("release_marginals", "ordinary_default", h + privacy(epsilon=1.0) + b(0, 0, 1) + rows(s))
    write("release_marginals", "partitioned_default",
          h + privacy(epsilon=1.0) + b(1, 0, 2) + rows(s))
    write("release_marginals", "partitioned_pair",
          h + privacy(noise_multiplier=2.0) + b(3, 2, 1, 2, 0, 2, 3) + rows(s, 2))
    write("release_marginals", "partitioned_by_c0",
          h + privacy(epsilon=1.0) + b(5, 0, 4) + rows(s, 3))
    h, s = header(relation=REPLACE_ONE, numerics=((WIDE, 2),), cats=(4, 2), label=3, n=25)
    write("release_marginals", "replace_one_partitioned",
          h + privacy(epsilon=0.3) + b(1, 1, 1, 0, 2, 5) + rows(s, 5))
    write("release_marginals", "epsilon_1e-6", h + privacy(epsilon=1e-6) + b(1, 0, 6) + rows(s, 5))
    write("release_marginals", "noise_1e300",
          h + privacy(noise_multiplier=1e300) + b(1, 0, 7) + rows(s, 5))
    # One row: every part but one is empty.
    h, s = header(numerics=(), cats=(2,), label=3, n=1)
    write("release_marginals", "one_row_empty_parts",
          h + privacy(epsilon=1.0) + b(1, 0, 8) + rows(s, 6))


def release_aim():
    # aim(rounds, cells/4, workload bits), then the noise seed byte.
    h, s = header(numerics=((AGE, 3), (UNIT, 1)), cats=(3,), label=2, n=40)
    write("release_aim", "valid_epsilon_1", h + privacy(epsilon=1.0) + b(0, 0, 0, 1) + rows(s))
    write("release_aim", "short_run", h + privacy(epsilon=1.0) + b(3, 0, 0, 2) + rows(s))
    write("release_aim", "workload_0_1", h + privacy(epsilon=2.0) + b(6, 0, 3, 3) + rows(s))
    write("release_aim", "unknown_column", h + privacy(epsilon=1.0) + b(0, 0, 0x81, 3) + rows(s))
    write("release_aim", "model_too_small", h + privacy(epsilon=1.0) + b(0, 1, 0, 3) + rows(s))
    h, s = header(relation=REPLACE_ONE, numerics=((WIDE, 2),), cats=(4, 2), label=3, n=25)
    write("release_aim", "valid_replace_one", h + privacy(epsilon=0.3) + b(0, 0, 0, 2) + rows(s, 5))
    write("release_aim", "epsilon_1e-6", h + privacy(epsilon=1e-6) + b(0, 0, 0, 3) + rows(s, 5))
    write("release_aim", "epsilon_1e6", h + privacy(epsilon=1e6) + b(0, 0, 0, 4) + rows(s, 5))
    write("release_aim", "epsilon_1e300", h + privacy(epsilon=1e300) + b(0, 0, 0, 6) + rows(s, 5))
    write("release_aim", "epsilon_denormal",
          h + privacy(epsilon=5e-324) + b(0, 0, 0, 7) + rows(s, 5))
    h, s = header(numerics=(), cats=(2,), label=2, n=1)
    write("release_aim", "one_row", h + privacy(epsilon=1.0) + b(0, 0, 0, 5) + rows(s, 6))
    h, s = header(delta=3, numerics=(), cats=(2,), label=2, n=1)
    write("release_aim", "epsilon_5e-143_delta_1e-12",
          h + privacy(epsilon=5.4941909356181673e-143) + b(0, 0, 0, 0) + rows(s, 6))


def step_rff():
    h, s = header()
    write("step_rff", "valid", h + session() + rff_params() + b(1) + rows(s))
    h, s = header(relation=REPLACE_ONE, n=50)
    write("step_rff", "valid_replace_one",
          h + session(q=0.3, epsilon=2.0) + rff_params(k=8) + b(0) + rows(s, 7))
    h, s = header()
    write("step_rff", "noise_multiplier_1e30",
          h + session(noise_multiplier=1e30) + rff_params() + b(1) + rows(s))
    write("step_rff", "noise_multiplier_1e100",
          h + session(noise_multiplier=1e100) + rff_params() + b(1) + rows(s))


def dp_sgd(hidden=(8,), activation=1, loss=1, clip=1.0, batch=10.0, noise_seed=1,
           weights=((0.1, -0.1), 1)):
    out = b(len(hidden)) + bytes(4 + w - 1 for w in hidden) + b(activation, 0, loss)
    out += d(clip) + d(batch) + b(noise_seed, 0)
    palette, mode = weights
    return out + pattern(palette, mode=mode, stride=3)


def step_dp_sgd():
    h, s = header()
    write("step_dp_sgd", "valid", h + session() + dp_sgd() + rows(s))
    h, s = header(relation=REPLACE_ONE, n=30)
    write("step_dp_sgd", "valid_wgan_replace_one",
          h + session(q=0.5, epsilon=3.0) + dp_sgd(hidden=(4, 4), loss=2, activation=3) +
          rows(s, 8))
    # Issue 23: clip norm 1e-305 fails every step after the read.
    h, s = header()
    write("step_dp_sgd", "clip_norm_1e-305", h + session() + dp_sgd(clip=1e-305) + rows(s))
    # Issue 23: weights of 3e38 (8 hidden layers) overflow; the clipped sum
    # is NaN and the noise step refuses it after the read.
    h, s = header(numerics=((AGE, 0),), n=30)
    write("step_dp_sgd", "weights_3e38",
          h + session(q=1.0, noise_multiplier=100.0) +
          dp_sgd(hidden=(4,) * 8, weights=((3e38,), 0)) + rows(s, 9))
    write("step_dp_sgd", "weights_3e38_mixed_signs",
          h + session(q=1.0, noise_multiplier=100.0) +
          dp_sgd(hidden=(4,) * 8, weights=((3e38, -3e38), 1)) + rows(s, 9))
    write("step_dp_sgd", "weights_3e38_wgan",
          h + session(q=1.0, noise_multiplier=100.0) +
          dp_sgd(hidden=(4,) * 8, loss=2, weights=((3e38,), 0)) + rows(s, 9))
    write("step_dp_sgd", "weights_denormal_and_3e38",
          h + session(q=1.0, noise_multiplier=100.0) +
          dp_sgd(hidden=(2,) * 8, weights=((3e38, -3e38, 1e-45, 0.5), 1)) + rows(s, 9))
    # A divisor so small that the answer overflows float.
    h, s = header()
    write("step_dp_sgd", "expected_batch_size_1e-305",
          h + session() + dp_sgd(batch=1e-305) + rows(s))


def kernel(bandwidths=(), conditional=False, batch=10.0, num_points=4, points=((0.2, 0.7), 1),
           labels=None):
    out = b(len(bandwidths)) + b"".join(d(h) for h in bandwidths)
    out += b(1 if conditional else 0) + d(batch) + b(0) + count(0) + b(1) + count(num_points)
    palette, mode = points
    out += pattern(palette, mode=mode)
    labels = labels if labels is not None else list(range(num_points))
    return out + bytes(labels[:num_points])


def step_kernel_witness():
    h, s = header()
    write("step_kernel_witness", "valid", h + session() + kernel() + rows(s))
    write("step_kernel_witness", "valid_conditional",
          h + session(q=0.3, epsilon=1.0) + kernel(conditional=True, num_points=6,
                                                   bandwidths=(0.5, 2.0)) + rows(s, 10))
    # Issue 23: expected_batch_size 1e305 fails every step after the read.
    write("step_kernel_witness", "expected_batch_size_1e305",
          h + session() + kernel(batch=1e305) + rows(s))
    # Issue 23: REPLACE_ONE at q = 0.29, n = 100: divisor floor(q n + 1e-9)
    # = 29 against the batch floor(q n) = 28.
    h, s = header(relation=REPLACE_ONE, n=100)
    write("step_kernel_witness", "replace_one_q029_n100",
          h + session(q=0.29) + kernel() + rows(s, 11))


if __name__ == "__main__":
    release_rff()
    release_charfn()
    release_mst()
    release_aim()
    release_marginals()
    step_rff()
    step_dp_sgd()
    step_kernel_witness()
