/* A small recursive-descent JSON reader (RFC 8259) for scenario files. See json.h. */
#include "json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct {
    const char *text;
    const char *at;
    char *error;
    size_t error_size;
    int failed;
} parser;

static void fail(parser *p, const char *what) {
    if (p->failed) return;
    p->failed = 1;
    int line = 1, column = 1;
    for (const char *c = p->text; c < p->at && *c; c++) {
        if (*c == '\n') {
            line++;
            column = 1;
        } else {
            column++;
        }
    }
    snprintf(p->error, p->error_size, "%s at line %d, column %d", what, line, column);
}

static jnode *new_node(parser *p, jtype type) {
    jnode *node = calloc(1, sizeof *node);
    if (!node) fail(p, "out of memory");
    else node->type = type;
    return node;
}

static void skip_space(parser *p) {
    while (*p->at == ' ' || *p->at == '\t' || *p->at == '\n' || *p->at == '\r') p->at++;
}

static int append(parser *p, jnode *container, char *key, jnode *value) {
    size_t n = container->length + 1;
    jnode **items = realloc(container->items, n * sizeof *items);
    if (!items) {
        fail(p, "out of memory");
        return 0;
    }
    container->items = items;
    if (container->type == J_OBJECT) {
        char **keys = realloc(container->keys, n * sizeof *keys);
        if (!keys) {
            fail(p, "out of memory");
            return 0;
        }
        container->keys = keys;
        keys[n - 1] = key;
    }
    items[n - 1] = value;
    container->length = n;
    return 1;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(parser *p, unsigned *out) {
    unsigned value = 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_value(p->at[i]);
        if (digit < 0) {
            fail(p, "invalid \\u escape");
            return 0;
        }
        value = value * 16 + (unsigned)digit;
    }
    p->at += 4;
    *out = value;
    return 1;
}

static size_t put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* p->at is on the opening quote. The decoded text is never longer than the source text. */
static char *parse_string_raw(parser *p) {
    const char *start = ++p->at;
    const char *end = start;
    while (*end && *end != '"') end += (*end == '\\' && end[1]) ? 2 : 1;
    if (*end != '"') {
        fail(p, "unterminated string");
        return NULL;
    }
    char *out = malloc((size_t)(end - start) + 1);
    if (!out) {
        fail(p, "out of memory");
        return NULL;
    }
    size_t n = 0;
    while (*p->at != '"') {
        unsigned char c = (unsigned char)*p->at;
        if (c < 0x20) {
            fail(p, "control character in string");
            free(out);
            return NULL;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            p->at++;
            continue;
        }
        p->at++;
        char esc = *p->at++;
        switch (esc) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (!read_hex4(p, &cp)) {
                free(out);
                return NULL;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF && p->at[0] == '\\' && p->at[1] == 'u') {
                unsigned low;
                p->at += 2;
                if (!read_hex4(p, &low)) {
                    free(out);
                    return NULL;
                }
                if (low >= 0xDC00 && low <= 0xDFFF)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) { /* a surrogate left unpaired */
                fail(p, "invalid \\u surrogate pair");
                free(out);
                return NULL;
            }
            n += put_utf8(out + n, cp);
            break;
        }
        default:
            p->at--;
            fail(p, "invalid escape in string");
            free(out);
            return NULL;
        }
    }
    p->at++; /* closing quote */
    out[n] = '\0';
    return out;
}

static jnode *parse_value(parser *p, int depth);

static jnode *parse_number(parser *p) {
    const char *start = p->at;
    if (*p->at == '-') p->at++;
    if (*p->at < '0' || *p->at > '9') {
        fail(p, "invalid number");
        return NULL;
    }
    int integral = 1;
    while (*p->at >= '0' && *p->at <= '9') p->at++;
    if (*p->at == '.') {
        integral = 0;
        p->at++;
        if (*p->at < '0' || *p->at > '9') {
            fail(p, "invalid number");
            return NULL;
        }
        while (*p->at >= '0' && *p->at <= '9') p->at++;
    }
    if (*p->at == 'e' || *p->at == 'E') {
        integral = 0;
        p->at++;
        if (*p->at == '+' || *p->at == '-') p->at++;
        if (*p->at < '0' || *p->at > '9') {
            fail(p, "invalid number");
            return NULL;
        }
        while (*p->at >= '0' && *p->at <= '9') p->at++;
    }
    jnode *node = new_node(p, J_NUMBER);
    if (!node) return NULL;
    node->number = strtod(start, NULL);
    if (integral) {
        errno = 0;
        long long value = strtoll(start, NULL, 10);
        if (errno == 0) {
            node->integer = value;
            node->is_integer = 1;
        }
    } else if (node->number == (double)(long long)node->number) {
        node->integer = (long long)node->number;
        node->is_integer = 1;
    }
    return node;
}

static jnode *parse_container(parser *p, int depth, jtype type) {
    char close = type == J_OBJECT ? '}' : ']';
    jnode *node = new_node(p, type);
    if (!node) return NULL;
    p->at++;
    skip_space(p);
    if (*p->at == close) {
        p->at++;
        return node;
    }
    for (;;) {
        char *key = NULL;
        skip_space(p);
        if (type == J_OBJECT) {
            if (*p->at != '"') {
                fail(p, "expected a string key");
                break;
            }
            key = parse_string_raw(p);
            if (!key) break;
            skip_space(p);
            if (*p->at != ':') {
                free(key);
                fail(p, "expected ':'");
                break;
            }
            p->at++;
        }
        jnode *value = parse_value(p, depth + 1);
        if (!value || !append(p, node, key, value)) {
            free(key);
            json_free(value);
            break;
        }
        skip_space(p);
        if (*p->at == ',') {
            p->at++;
            continue;
        }
        if (*p->at == close) {
            p->at++;
            return node;
        }
        fail(p, type == J_OBJECT ? "expected ',' or '}'" : "expected ',' or ']'");
        break;
    }
    json_free(node);
    return NULL;
}

static int match_word(parser *p, const char *word) {
    size_t n = strlen(word);
    if (strncmp(p->at, word, n) != 0) return 0;
    p->at += n;
    return 1;
}

static jnode *parse_value(parser *p, int depth) {
    if (depth > MAX_DEPTH) {
        fail(p, "nesting too deep");
        return NULL;
    }
    skip_space(p);
    char c = *p->at;
    if (c == '{') return parse_container(p, depth, J_OBJECT);
    if (c == '[') return parse_container(p, depth, J_ARRAY);
    if (c == '"') {
        char *s = parse_string_raw(p);
        if (!s) return NULL;
        jnode *node = new_node(p, J_STRING);
        if (!node) {
            free(s);
            return NULL;
        }
        node->string = s;
        return node;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p);
    if (match_word(p, "true") || match_word(p, "false")) {
        jnode *node = new_node(p, J_BOOL);
        if (node) node->boolean = p->at[-1] == 'e' && p->at[-2] == 'u';
        return node;
    }
    if (match_word(p, "null")) return new_node(p, J_NULL);
    fail(p, c ? "unexpected character" : "unexpected end of input");
    return NULL;
}

jnode *json_parse(const char *text, char *error, size_t error_size) {
    parser p = {text, text, error, error_size, 0};
    jnode *root = parse_value(&p, 0);
    if (root) {
        skip_space(&p);
        if (*p.at) {
            fail(&p, "trailing characters after the document");
            json_free(root);
            root = NULL;
        }
    }
    return root;
}

void json_free(jnode *node) {
    if (!node) return;
    for (size_t i = 0; i < node->length; i++) {
        json_free(node->items[i]);
        if (node->keys) free(node->keys[i]);
    }
    free(node->items);
    free(node->keys);
    free(node->string);
    free(node);
}

const jnode *json_get(const jnode *object, const char *key) {
    if (!object || object->type != J_OBJECT) return NULL;
    /* Last occurrence wins, as in most JSON readers. */
    for (size_t i = object->length; i-- > 0;) {
        if (strcmp(object->keys[i], key) == 0) {
            const jnode *value = object->items[i];
            return value->type == J_NULL ? NULL : value;
        }
    }
    return NULL;
}

int json_get_integer(const jnode *object, const char *key, long long *out) {
    const jnode *v = json_get(object, key);
    if (!v || v->type != J_NUMBER) return 0;
    *out = v->is_integer ? v->integer : (long long)v->number;
    return 1;
}

int json_get_number(const jnode *object, const char *key, double *out) {
    const jnode *v = json_get(object, key);
    if (!v || v->type != J_NUMBER) return 0;
    *out = v->number;
    return 1;
}

int json_get_bool(const jnode *object, const char *key, int *out) {
    const jnode *v = json_get(object, key);
    if (!v || v->type != J_BOOL) return 0;
    *out = v->boolean;
    return 1;
}

const char *json_get_string(const jnode *object, const char *key) {
    const jnode *v = json_get(object, key);
    return v && v->type == J_STRING ? v->string : NULL;
}

int json_list_contains(const jnode *object, const char *key, const char *value) {
    const jnode *list = json_get(object, key);
    if (!list || list->type != J_ARRAY) return 0;
    for (size_t i = 0; i < list->length; i++) {
        const jnode *item = list->items[i];
        if (item->type == J_STRING && strcmp(item->string, value) == 0) return 1;
    }
    return 0;
}

int json_list_contains_integer(const jnode *object, const char *key, long long value) {
    const jnode *list = json_get(object, key);
    if (!list || list->type != J_ARRAY) return 0;
    for (size_t i = 0; i < list->length; i++) {
        const jnode *item = list->items[i];
        if (item->type == J_NUMBER && item->is_integer && item->integer == value) return 1;
    }
    return 0;
}
