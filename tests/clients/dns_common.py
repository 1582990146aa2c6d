"""DNS wire helpers shared by the dns_*.py clients and servers (stdlib only).

Builds queries and answers byte by byte (so that a test can also build the
malformed ones), and parses messages, following compression pointers, without
ever raising on garbage: parse() returns {"error": ...} instead.
"""
import struct

TYPES = {
    "A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "NULL": 10, "PTR": 12, "MX": 15,
    "TXT": 16, "AAAA": 28, "SRV": 33, "OPT": 41, "ANY": 255, "CAA": 257,
}
TYPE_NAMES = {v: k for k, v in TYPES.items()}

CLASS_IN = 1
FLAG_QR = 0x8000
FLAG_AA = 0x0400
FLAG_RD = 0x0100
FLAG_RA = 0x0080


def qtype_code(t):
    if isinstance(t, int):
        return t
    t = str(t).upper()
    if t in TYPES:
        return TYPES[t]
    if t.startswith("TYPE"):
        return int(t[4:])
    return int(t)


def type_name(code):
    return TYPE_NAMES.get(code, "TYPE%d" % code)


def encode_name(name, terminate=True):
    """'a.b.test' -> b'\\x01a\\x01b\\x04test\\x00'. Labels are taken as given
    (bytes or str, any case); a trailing dot is ignored."""
    if isinstance(name, str):
        name = name.encode("latin-1")
    name = name.rstrip(b".")
    out = b""
    if name:
        for label in name.split(b"."):
            out += bytes([len(label)]) + label
    return out + (b"\x00" if terminate else b"")


def header(qid, flags=FLAG_RD, qd=1, an=0, ns=0, ar=0):
    return struct.pack("!HHHHHH", qid & 0xFFFF, flags & 0xFFFF, qd, an, ns, ar)


def question(name, qtype="A", qclass=CLASS_IN):
    return encode_name(name) + struct.pack("!HH", qtype_code(qtype), qclass)


def opt_rr(udp_size=1232, cookie=None):
    """An EDNS0 OPT pseudo-record, as dig sends it (optionally with a COOKIE option)."""
    rdata = b""
    if cookie is not None:
        rdata = struct.pack("!HH", 10, len(cookie)) + cookie
    return b"\x00" + struct.pack("!HHIH", 41, udp_size, 0, len(rdata)) + rdata


def build_query(name, qtype="A", qid=0x1234, flags=FLAG_RD, edns=False, cookie=None):
    ar = 1 if edns else 0
    msg = header(qid, flags, 1, 0, 0, ar) + question(name, qtype)
    if edns:
        msg += opt_rr(cookie=cookie)
    return msg


def rr(owner_bytes, rtype, ttl, rdata, rclass=CLASS_IN):
    return owner_bytes + struct.pack("!HHIH", qtype_code(rtype), rclass, ttl, len(rdata)) + rdata


def a_rdata(addr):
    import socket
    return socket.inet_pton(socket.AF_INET, addr)


def aaaa_rdata(addr):
    import socket
    return socket.inet_pton(socket.AF_INET6, addr)


def build_answer(qid, qname, qtype, records, flags=FLAG_QR | FLAG_AA | FLAG_RD | FLAG_RA, rcode=0):
    """records: [(rtype, ttl, rdata)] all owned by qname, written with a
    compression pointer to the question name (offset 12), like real servers."""
    msg = header(qid, flags | (rcode & 0xF), 1, len(records), 0, 0) + question(qname, qtype)
    for rtype, ttl, rdata in records:
        msg += rr(b"\xc0\x0c", rtype, ttl, rdata)
    return msg


def _read_name(data, off, depth=0):
    labels = []
    jumped = False
    end = None
    hops = 0
    while True:
        if off >= len(data):
            raise ValueError("name runs past the end")
        n = data[off]
        if n == 0:
            off += 1
            break
        if n & 0xC0 == 0xC0:
            if off + 1 >= len(data):
                raise ValueError("truncated pointer")
            ptr = ((n & 0x3F) << 8) | data[off + 1]
            if not jumped:
                end = off + 2
            jumped = True
            hops += 1
            if hops > 64 or ptr >= len(data):
                raise ValueError("bad compression pointer")
            off = ptr
            continue
        if n & 0xC0:
            raise ValueError("reserved label type 0x%02x" % n)
        if off + 1 + n > len(data):
            raise ValueError("label runs past the end")
        labels.append(data[off + 1:off + 1 + n].decode("latin-1"))
        off += 1 + n
    return ".".join(labels), (end if jumped else off), jumped


def parse(data):
    """A DNS message -> dict; never raises."""
    out = {"len": len(data)}
    try:
        if len(data) < 12:
            raise ValueError("short header")
        qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", data[:12])
        out.update(id=qid, flags=flags, qr=bool(flags & FLAG_QR), opcode=(flags >> 11) & 0xF,
                   rcode=flags & 0xF, qdcount=qd, ancount=an, nscount=ns, arcount=ar)
        off = 12
        pointers = 0
        qs = []
        for _ in range(qd):
            name, off, j = _read_name(data, off)
            pointers += j
            if off + 4 > len(data):
                raise ValueError("truncated question")
            t, c = struct.unpack("!HH", data[off:off + 4])
            off += 4
            qs.append({"name": name, "type": type_name(t)})
        out["questions"] = qs
        answers = []
        for _ in range(an):
            name, off, j = _read_name(data, off)
            pointers += j
            if off + 10 > len(data):
                raise ValueError("truncated record")
            t, c, ttl, rdlen = struct.unpack("!HHIH", data[off:off + 10])
            off += 10
            rdata = data[off:off + rdlen]
            if len(rdata) != rdlen:
                raise ValueError("truncated rdata")
            a = {"name": name, "type": type_name(t), "ttl": ttl}
            if t == 1 and rdlen == 4:
                import socket
                a["addr"] = socket.inet_ntop(socket.AF_INET, rdata)
            elif t == 28 and rdlen == 16:
                import socket
                a["addr"] = socket.inet_ntop(socket.AF_INET6, rdata)
            elif t == 5:
                a["target"], _, j = _read_name(data, off)
                pointers += j
            answers.append(a)
            off += rdlen
        out["answers"] = answers
        out["pointers"] = pointers
        out["trailing"] = len(data) - off if ar == 0 and ns == 0 else None
    except (ValueError, struct.error, IndexError) as e:
        out["error"] = str(e)
    return out


def addresses(parsed):
    return [a["addr"] for a in parsed.get("answers", []) if "addr" in a]
