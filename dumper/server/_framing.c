/* The dump's byte loop, compiled: frame whole binlog events as protocol packets.
 *
 * frame_events(buf, off, seq) -> (bytes packets, offset reached, next seq, events framed)
 *
 * Byte-identical to dumper.server.framing.frame_events_py (the pure-Python fallback; the tests run
 * both): each event becomes one packet, 3-byte length (event size + 1), sequence id, 0x00, the
 * event. It stops at the first event that is incomplete in ``buf``, impossible (size < 19) or too
 * big for one packet (size + 1 >= 0xFFFFFF); the caller handles that event.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define HEADER_LEN 19
#define SPLIT_AT (0xFFFFFF - 1)

static inline unsigned long read_u32(const unsigned char *p) {
    return (unsigned long)p[0] | ((unsigned long)p[1] << 8) | ((unsigned long)p[2] << 16)
        | ((unsigned long)p[3] << 24);
}

static PyObject *frame_events(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t off;
    int seq;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*ni", &view, &off, &seq))
        return NULL;
    const unsigned char *src = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    if (off < 0 || off > n) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "offset outside the buffer");
        return NULL;
    }
    /* First pass: where the whole, framable events end. */
    Py_ssize_t end = off, count = 0;
    while (end + HEADER_LEN <= n) {
        unsigned long size = read_u32(src + end + 9);
        if (size < HEADER_LEN || size >= SPLIT_AT || (Py_ssize_t)size > n - end)
            break;
        end += (Py_ssize_t)size;
        count++;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (end - off) + 5 * count);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t at = off;
    unsigned int s = (unsigned int)seq & 0xFF;
    Py_BEGIN_ALLOW_THREADS
    while (at < end) {
        unsigned long size = read_u32(src + at + 9);
        unsigned long len = size + 1;
        dst[0] = (unsigned char)(len & 0xFF);
        dst[1] = (unsigned char)((len >> 8) & 0xFF);
        dst[2] = (unsigned char)((len >> 16) & 0xFF);
        dst[3] = (unsigned char)s;
        dst[4] = 0;
        memcpy(dst + 5, src + at, size);
        dst += 5 + size;
        at += (Py_ssize_t)size;
        s = (s + 1) & 0xFF;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("(NnIn)", out, end, s, count);
}

static PyMethodDef methods[] = {
    {"frame_events", frame_events, METH_VARARGS,
     "frame_events(buf, off, seq) -> (packets, offset reached, next seq, events framed)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_framing", "The dump's compiled byte loop (see framing.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__framing(void) { return PyModule_Create(&module); }
