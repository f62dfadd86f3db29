#!/usr/bin/env python3
"""peres.py EXE TYPE... : exit 0 when the PE file's resource directory has an entry of every
numeric resource TYPE (3 RT_ICON, 14 RT_GROUP_ICON, 16 RT_VERSION, 24 RT_MANIFEST), else 1."""
import struct
import sys


def resource_types(path):
    data = open(path, 'rb').read()
    pe = struct.unpack_from('<I', data, 0x3C)[0]
    if data[pe:pe + 4] != b'PE\0\0':
        raise SystemExit('not a PE file')
    nsec = struct.unpack_from('<H', data, pe + 6)[0]
    optsize = struct.unpack_from('<H', data, pe + 20)[0]
    opt = pe + 24
    magic = struct.unpack_from('<H', data, opt)[0]
    ddir = opt + (112 if magic == 0x20B else 96)
    rva, size = struct.unpack_from('<II', data, ddir + 2 * 8)  # data directory 2: resources
    if rva == 0 or size == 0:
        return set()
    sec = opt + optsize
    for i in range(nsec):
        s = sec + 40 * i
        vsize, vaddr, rawsize, rawptr = struct.unpack_from('<IIII', data, s + 8)
        if vaddr <= rva < vaddr + max(vsize, rawsize):
            off = rawptr + (rva - vaddr)
            break
    else:
        raise SystemExit('resource directory outside every section')
    named, ids = struct.unpack_from('<HH', data, off + 12)
    types = set()
    for k in range(named + ids):
        name, _ = struct.unpack_from('<II', data, off + 16 + 8 * k)
        if not name & 0x80000000:
            types.add(name)
    return types


if __name__ == '__main__':
    have = resource_types(sys.argv[1])
    want = {int(t) for t in sys.argv[2:]}
    missing = sorted(want - have)
    print('resource types:', sorted(have), 'missing:', missing)
    sys.exit(1 if missing else 0)
