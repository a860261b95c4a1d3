#!/usr/bin/python3
"""Writes the tiny IDX test sample: the first 5 images and labels of Fashion-MNIST t10k.

    /usr/bin/python3 scripts/make_idx_sample.py            # (re)write tests/fixtures/idx/
    /usr/bin/python3 scripts/make_idx_sample.py --check-npz FILE.npz

Reads /usr/share/datasets/fashion-mnist (Debian package dataset-fashion-mnist). Output is
byte-identical on reruns (gzip mtime 0). scripts/make_fixtures.py deletes tests/fixtures/ as a
whole, so rerun this afterwards.

--check-npz loads an .npz written by xgrad with numpy.load (allow_pickle=False) and prints every
entry, to confirm by hand that NumPy reads xgrad's archives.
"""
import gzip
import os
import struct
import sys

SOURCE_DIR = "/usr/share/datasets/fashion-mnist"
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "idx")
COUNT = 5


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    assert zero == 0 and dtype == 0x08, path
    shape = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    return shape, data[4 + 4 * ndim:]


def write_sample(name, count):
    shape, body = read_idx(os.path.join(SOURCE_DIR, name))
    item = 1
    for extent in shape[1:]:
        item *= extent
    header = struct.pack(">HBB", 0, 0x08, len(shape)) + struct.pack(">%dI" % len(shape), count, *shape[1:])
    out = os.path.join(OUT_DIR, name.replace("t10k-", "t10k-first%d-" % count))
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
        f.write(header + body[:count * item])
    print("wrote", os.path.relpath(out), (count,) + tuple(shape[1:]), "first bytes", list(body[:8]))


def check_npz(path):
    import numpy as np
    with np.load(path, allow_pickle=False) as npz:
        for key in npz.files:
            a = npz[key]
            print("%-24s dtype=%s shape=%s C-order=%s values=%s" %
                  (key, a.dtype, a.shape, a.flags["C_CONTIGUOUS"], a.ravel()[:6].tolist()))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check-npz":
        check_npz(sys.argv[2])
        return
    os.makedirs(OUT_DIR, exist_ok=True)
    write_sample("t10k-images-idx3-ubyte.gz", COUNT)
    write_sample("t10k-labels-idx1-ubyte.gz", COUNT)


if __name__ == "__main__":
    main()
