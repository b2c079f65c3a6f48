/* The live DN client's byte loop, compiled: a run of binlog events out of replication packets.
 *
 * unframe_run(buf, off, pos, stop_types, max_size)
 *     -> (bytes events, offset reached, position after, events taken, next sequence id or -1)
 *
 * Byte-identical to binlog.wire.unframe_run_py (the pure-Python fallback; the tests run both): from
 * ``off`` in a buffer of stream packets (3-byte length, sequence id, 0x00, the event), the events
 * that follow one another in the file from position ``pos`` — the event's size is the packet's,
 * its log_pos is ``pos`` + size, its type is not flagged in ``stop_types`` (256 bytes), size <=
 * ``max_size`` — joined as the file holds them, without the packet headers. It stops at the first
 * packet that is incomplete, a continuation (16 MiB - 1), not an event (OK byte), or not such an
 * event; the caller reads that one the checked way.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define HEADER_LEN 19
#define MAX_PAYLOAD 0xFFFFFF

static inline unsigned long long read_u32(const unsigned char *p) {
    return (unsigned long long)p[0] | ((unsigned long long)p[1] << 8) | ((unsigned long long)p[2] << 16)
        | ((unsigned long long)p[3] << 24);
}

static inline unsigned long read_u24(const unsigned char *p) {
    return (unsigned long)p[0] | ((unsigned long)p[1] << 8) | ((unsigned long)p[2] << 16);
}

static PyObject *unframe_run(PyObject *self, PyObject *args) {
    Py_buffer view, stops;
    Py_ssize_t off;
    unsigned long long pos, max_size;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nKy*K", &view, &off, &pos, &stops, &max_size))
        return NULL;
    if (stops.len != 256 || off < 0 || off > view.len) {
        PyBuffer_Release(&view);
        PyBuffer_Release(&stops);
        PyErr_SetString(PyExc_ValueError, stops.len != 256 ? "stop_types must be 256 bytes"
                                                            : "offset outside the buffer");
        return NULL;
    }
    const unsigned char *src = (const unsigned char *)view.buf;
    const unsigned char *stop = (const unsigned char *)stops.buf;
    Py_ssize_t n = view.len;
    /* First pass: how far the run goes (packets stay where they are). */
    Py_ssize_t at = off, total = 0, count = 0;
    unsigned long long p = pos;
    int seq = -1;
    while (at + 4 + 1 + HEADER_LEN <= n) {
        unsigned long plen = read_u24(src + at);
        const unsigned char *ev = src + at + 5;
        if (plen >= MAX_PAYLOAD || (Py_ssize_t)plen > n - at - 4 || plen < 1 + HEADER_LEN || src[at + 4] != 0)
            break;
        unsigned long long size = read_u32(ev + 9);
        if (size != plen - 1 || read_u32(ev + 13) != p + size || stop[ev[4]] || size > max_size)
            break;
        p += size;
        total += (Py_ssize_t)size;
        seq = src[at + 3];
        at += 4 + (Py_ssize_t)plen;
        count++;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        PyBuffer_Release(&view);
        PyBuffer_Release(&stops);
        return NULL;
    }
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t from = off;
    while (from < at) {
        unsigned long plen = read_u24(src + from);
        memcpy(dst, src + from + 5, plen - 1);
        dst += plen - 1;
        from += 4 + (Py_ssize_t)plen;
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&stops);
    return Py_BuildValue("(NnKni)", out, at, p, count, seq < 0 ? -1 : (seq + 1) & 0xFF);
}

static PyMethodDef methods[] = {
    {"unframe_run", unframe_run, METH_VARARGS,
     "unframe_run(buf, off, pos, stop_types, max_size) -> (events, offset, position, count, next seq or -1)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_wire", "The live DN client's compiled byte loop (see binlog/wire.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__wire(void) { return PyModule_Create(&module); }
