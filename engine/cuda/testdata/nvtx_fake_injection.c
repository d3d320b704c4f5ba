// A stand-in for a profiler's NVTX tool library, for nvtx_test.go: built with
// `gcc -shared -fPIC`, named by NVTX_INJECTION64_PATH, it attaches the way
// NVTX v3 tools do and appends one line per event to the file that
// XRUN_NVTX_FAKE_LOG names:
//
//   attach callbacks=<size> version=<size>:<api version> etid2=<nil|set>
//   module <id> ids=<n> ends=<nil|set>   (for modules 1..7)
//   push <depth> <message>
//   pop <depth>
//
// XRUN_NVTX_FAKE_REFUSE=1 makes it refuse (return 0) after logging
// "refuse"; built with -DXR_FAKE_NO_ENTRY it lacks the entry point.

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*fn)(void);

struct callbacks {
	size_t struct_size;
	int (*module_table)(int module, fn ***table, unsigned *ids);
};

struct version {
	size_t struct_size;
	uint32_t version;
	uint32_t reserved;
	void (*set_tool_version)(uint32_t);
};

static int depth;

static void logf_(const char *format, ...) {
	const char *path = getenv("XRUN_NVTX_FAKE_LOG");
	if (!path) {
		return;
	}
	FILE *f = fopen(path, "a");
	if (!f) {
		return;
	}
	va_list ap;
	va_start(ap, format);
	vfprintf(f, format, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

static int push_a(const char *msg) {
	logf_("push %d %s", depth, msg);
	return depth++;
}

static int pop(void) {
	if (depth == 0) {
		logf_("pop unbalanced");
		return -1;
	}
	--depth;
	logf_("pop %d", depth);
	return depth;
}

#ifdef XR_FAKE_NO_ENTRY
int SomethingElse(const void *(*get)(uint32_t)) { return get != 0; }
#else
int InitializeInjectionNvtx2(const void *(*get)(uint32_t)) {
	if (getenv("XRUN_NVTX_FAKE_REFUSE")) {
		logf_("refuse");
		return 0;
	}
	const struct callbacks *cb = get(1);
	const struct version *v = get(3);
	if (!cb || !v) {
		logf_("missing export table");
		return 0;
	}
	logf_("attach callbacks=%zu version=%zu:%u etid2=%s", cb->struct_size, v->struct_size, v->version,
		get(2) ? "set" : "nil");
	v->set_tool_version(3);
	fn **core = 0;
	for (int m = 1; m <= 7; m++) {
		fn **table = 0;
		unsigned ids = 0;
		if (!cb->module_table(m, &table, &ids)) {
			logf_("module %d none", m);
			continue;
		}
		// Entry 0 (the invalid id) and entry ids (one past the last id)
		// must be NULL; every id between must have a slot.
		int holes = 0;
		for (unsigned i = 1; i < ids; i++) {
			holes += table[i] == 0;
		}
		logf_("module %d ids=%u ends=%s holes=%d", m, ids, table[0] || table[ids] ? "set" : "nil", holes);
		if (m == 1) {
			core = table;
		}
	}
	if (!core) {
		return 0;
	}
	*core[9] = (fn)push_a;
	*core[11] = (fn)pop;
	return 1;
}
#endif
