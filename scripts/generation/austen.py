"""Jane Austen's six novels from Debian's r-cran-janeaustenr, read without R.

The package ships the novels only as R's lazy-load database (data/Rdata.rdx + Rdata.rdb): the
.rdx is a gzip'ed serialized R list of (offset, length) per object, and each object in the .rdb
is a 4-byte big-endian length followed by a zlib stream of an XDR-serialized R object (here a
character vector, one element per line of the novel). Debian has no Python reader for that
format (rpy2 would need R itself), so the small subset of R's serialization the files use
(vectors, strings, pairlists, symbols and references) is decoded here.
"""
import gzip
import os
import struct
import zlib

DATA_DIR = "/usr/lib/R/site-library/janeaustenr/data"
NOVELS = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey",
          "persuasion"]

# SEXP types (R Internals, "Serialization formats").
_NILVALUE, _SYM, _LIST, _CHAR, _LGL, _INT, _REAL, _STR, _VEC = 254, 1, 2, 9, 10, 13, 14, 16, 19
_REF = 255


class _Reader:
    def __init__(self, data):
        if data[:2] != b"X\n":
            raise ValueError("not an XDR-serialized R object")
        self.data, self.pos, self.refs = data, 2, []
        version = self.int()
        self.pos += 8  # writer and minimal reader R versions
        if version == 3:
            n = self.int()  # native encoding name
            self.pos += n

    def int(self):
        (v,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return v

    def item(self):
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind == _NILVALUE:
            return None
        if kind == _REF:
            return self.refs[(flags >> 8) - 1]
        if kind == _SYM:
            sym = self.item()
            self.refs.append(sym)
            return sym
        if kind == _CHAR:
            n = self.int()
            if n == -1:
                return None  # NA_character_
            s = self.data[self.pos:self.pos + n].decode("utf-8", errors="replace")
            self.pos += n
            return s
        if kind == _LIST:  # pairlist (attributes): [(tag, value), ...]
            if has_attr:
                self.item()
            tag = self.item() if has_tag else None
            head = [(tag, self.item())]
            rest = self.item()
            return head + (rest or [])
        if kind in (_STR, _VEC, _LGL, _INT, _REAL):
            n = self.int()
            if kind in (_STR, _VEC):
                value = [self.item() for _ in range(n)]
            else:
                size = 8 if kind == _REAL else 4
                fmt = ">%d%s" % (n, "d" if kind == _REAL else "i")
                value = list(struct.unpack_from(fmt, self.data, self.pos))
                self.pos += n * size
            if has_attr:
                names = dict(self.item()).get("names")
                if names is not None:  # a named list: [(name, value), ...]
                    return list(zip(names, value))
            return value
        raise ValueError("unsupported R object type %d" % kind)


def _unserialize(data):
    return _Reader(data).item()


def load_novels(data_dir=DATA_DIR):
    """Returns {novel name: text} for the six novels (lines joined with newlines)."""
    if not os.path.isfile(os.path.join(data_dir, "Rdata.rdx")):
        raise FileNotFoundError("%s/Rdata.rdx not found: install Debian's r-cran-janeaustenr "
                                "(scripts/install_deps.sh)" % data_dir)
    index = _unserialize(gzip.decompress(open(os.path.join(data_dir, "Rdata.rdx"), "rb").read()))
    variables = dict(index)["variables"]  # [(name, [offset, length]), ...]
    with open(os.path.join(data_dir, "Rdata.rdb"), "rb") as f:
        db = f.read()
    novels = {}
    for name, (offset, length) in variables:
        blob = db[offset:offset + length]
        lines = _unserialize(zlib.decompress(blob[4:]))
        novels[name] = "\n".join(line or "" for line in lines)
    missing = [n for n in NOVELS if n not in novels]
    if missing:
        raise ValueError("janeaustenr data lacks %s" % missing)
    return novels


if __name__ == "__main__":
    for name, text in load_novels().items():
        print("%-18s %8d chars  %r" % (name, len(text), text[:60]))
