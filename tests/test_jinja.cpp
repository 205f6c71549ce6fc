// Unit tests of the Jinja engine: each construct, whitespace rules, undefined values, Python
// printing and errors. Expected strings are what Python jinja2 3.1 prints with Hugging Face's
// settings (checked by hand with tools/gen_jinja_golden.py's environment()).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/jinja/jinja.h"

using llmctl::jinja::Options;
using llmctl::jinja::RaisedException;
using llmctl::jinja::Template;
using llmctl::jinja::TemplateError;
using Json = nlohmann::ordered_json;

namespace {

std::string render(const std::string& src, const Json& ctx = Json::object(), Options opt = {}) {
  return Template(src, opt).render(ctx);
}

std::string error_of(const std::string& src, const Json& ctx = Json::object()) {
  try {
    render(src, ctx);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("jinja prints values as Python str does", "[cpu]") {
  CHECK(render("{{ 1.0 }} {{ 3/2 }} {{ 10/5 }} {{ 1e20 }} {{ 0.1+0.2 }}") == "1.0 1.5 2.0 1e+20 0.30000000000000004");
  CHECK(render("{{ [1,'a',none,true,1.5] }} {{ {'a':'b'} }} {{ ('a',) }}") ==
        "[1, 'a', None, True, 1.5] {'a': 'b'} ('a',)");
  CHECK(render("{{ [\"it's\"] }}") == "[\"it's\"]");
  CHECK(render("{{ x }}|{{ none }}|{{ false }}") == "|None|False");
  CHECK(render("{{ {'b':1,'a':2} | dictsort }} {{ {'b':1,'a':2} | items | list }}") ==
        "[('a', 2), ('b', 1)] [('b', 1), ('a', 2)]");
}

TEST_CASE("jinja trim_blocks and lstrip_blocks as Hugging Face sets them", "[cpu]") {
  CHECK(render("  {% if true %}\n  x\n  {% endif %}\n  {{ 'y' }}\n") == "  x\n  y");
  CHECK(render("a  {%- if true -%}  b  {%- endif -%}  c") == "abc");
  CHECK(render("  {%+ if true %}x{% endif %}") == "  x");
  CHECK(render("{% if true +%}\nx{% endif %}") == "\nx");
  CHECK(render("  {# note #}\nx") == "x");
  CHECK(render("a\r\nb\n") == "a\nb");  // newlines normalized, one trailing newline dropped
  Options plain;
  plain.trim_blocks = false;
  plain.lstrip_blocks = false;
  CHECK(render("  {% if true %}\n  x\n  {% endif %}\n", Json::object(), plain) == "  \n  x\n  ");
}

TEST_CASE("jinja scoping: loops do not leak or carry sets, if does, namespaces do", "[cpu]") {
  CHECK(render("{% set x = 1 %}{% for i in [1,2,3] %}{{ x }}{% set x = x + 1 %}{% endfor %}|{{ x }}") == "111|1");
  CHECK(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}") == "5");
  CHECK(render("{% set ns = namespace(a=1) %}{% for i in [1,2] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}") == "4");
  CHECK(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}") == "21");
  CHECK_THROWS_AS(render("{% set d = {} %}{% set d.x = 1 %}"), TemplateError);
}

TEST_CASE("jinja for loops: loop object, else, filter, break, continue, unpacking", "[cpu]") {
  CHECK(render("{% for x in [1,2,3] %}{{ loop.index }}{{ loop.revindex }}{{ loop.cycle('a','b') }}"
               "{% if loop.first %}F{% endif %}{% endfor %}") == "13aF22b31a");
  CHECK(render("{% for x in [] %}a{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for x in range(10) if x is odd %}{% if x > 6 %}{% break %}{% endif %}"
               "{% if x == 3 %}{% continue %}{% endif %}{{ x }}{% endfor %}") == "15");
  CHECK(render("{% for x in range(9) if x is odd %}{{ loop.index0 }}/{{ loop.length }} {% endfor %}") == "0/4 1/4 2/4 3/4 ");
  CHECK(render("{% for m in [1,2,3] %}{{ loop.previtem }}/{{ loop.nextitem }};{% endfor %}") == "/2;1/3;2/;");
  CHECK(render("{% for a, b in [[1,2],[3,4]] %}{{ a }}{{ b }}{% endfor %}") == "1234");
  CHECK(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"z", 1}, {"a", 2}}}}) == "z=1;a=2;");
  CHECK(render("{% for k in d %}{{ k }}{% endfor %}", {{"d", {{"z", 1}, {"a", 2}}}}) == "za");
  CHECK(render("{% for t in tree recursive %}<{{ t.n }}{{ loop(t.c) if t.c }}>{% endfor %}",
               Json::parse(R"({"tree":[{"n":1,"c":[{"n":2},{"n":3}]},{"n":4}]})")) == "<1<2><3>><4>");
  CHECK(render("{% for c in 'ab' %}{{ c }}.{% endfor %}{% for x in missing %}never{% endfor %}") == "a.b.");
}

TEST_CASE("jinja macros, call blocks, filter and set blocks, generation", "[cpu]") {
  CHECK(render("{% macro m(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, b=3) }} {{ m('x', 'y') }}") ==
        "1-2 1-3 x-y");
  CHECK(render("{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}inside{% endcall %}") == "[inside]");
  CHECK(render("{% filter upper %}abc{% endfilter %}") == "ABC");
  CHECK(render("{% set x %}  block  {% endset %}[{{ x }}]") == "[  block  ]");
  CHECK(render("{% set x | trim %}  block  {% endset %}[{{ x }}]") == "[block]");
  CHECK(render("{% generation %}reply{% endgeneration %}") == "reply");
  CHECK_THROWS_WITH(render("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"),
                    Catch::Contains("recursion"));
}

TEST_CASE("jinja undefined values behave as Jinja's default Undefined", "[cpu]") {
  const Json ctx = {{"d", {{"a", 1}}}};
  CHECK(render("[{{ d.missing }}][{{ d['missing'] }}][{{ nothing }}]", ctx) == "[][][]");
  CHECK(render("{{ x is defined }} {{ d.a is defined }} {{ x is undefined }} {{ x | default('d') }}", ctx) ==
        "False True True d");
  CHECK(render("{{ '' | default('d', true) }} {{ none | default('d') }} {{ x | length }}") == "d None 0");
  CHECK_THROWS_WITH(render("{{ d.missing.x }}", ctx), Catch::Contains("'dict object' has no attribute 'missing'"));
  CHECK_THROWS_WITH(render("{{ foo.bar }}"), Catch::Contains("'foo' is undefined"));
  CHECK_THROWS_WITH(render("{{ undefined_fn() }}"), Catch::Contains("'undefined_fn' is undefined"));
  CHECK_THROWS_WITH(render("{{ x + 1 }}"), Catch::Contains("'x' is undefined"));
}

TEST_CASE("jinja operators follow Python", "[cpu]") {
  CHECK(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 3 }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }}") ==
        "3 -4 1 2 8 a1None abab");
  CHECK(render("{{ 1 in [1,2] }} {{ 'a' in 'abc' }} {{ 'k' in {'k':1} }} {{ 3 not in [1] }}") == "True True True True");
  CHECK(render("{{ 'yes' if 1 > 2 else 'no' }} {{ none is none }} {{ 1 is number }} {{ true is number }} {{ true is integer }}") ==
        "no True True True False");
  CHECK(render("{{ 'a' < 'b' }} {{ 1 < 2.5 }} {{ [1,2] == [1,2] }} {{ 1 == 1.0 }} {{ 1 == true }}") == "True True True True True");
  CHECK(render("{{ [1] + [2] }} {{ 'a' + 'b' }} {{ '%s-%d' % ('a', 3) }} {{ not 0 }} {{ 0 or 'x' }} {{ 1 and 2 }}") ==
        "[1, 2] ab a-3 True x 2");
  CHECK(render("{{ [1,2,3][1:] }} {{ [1,2,3][-1] }} {{ [1,2,3][::-1] }} [{{ [1,2,3][5] }}]") == "[2, 3] 3 [3, 2, 1] []");
  CHECK(render("{{ 'é你好' | length }} {{ 'é你好'[1:] }} {{ 'é你好'[::-1] }} {{ 'é你好'[0] }}") == "3 你好 好你é é");
  CHECK_THROWS_WITH(render("{{ 1 + 'a' }}"), Catch::Contains("unsupported operand type(s) for +: 'int' and 'str'"));
}

TEST_CASE("jinja filters used by chat templates", "[cpu]") {
  CHECK(render("{{ 'Hello World' | lower }} {{ 'abc' | upper }} {{ 'hello world' | title }} {{ 'hELLO' | capitalize }}") ==
        "hello world ABC Hello World Hello");
  CHECK(render("{{ [3,1,2] | sort }} {{ [1,2,2,3] | unique | list }} {{ [1,2,3] | reverse | list }} {{ [1,2,3] | first }} "
               "{{ [1,2,3] | last }} {{ [1,2,3] | join('-') }}") == "[1, 2, 3] [1, 2, 3] [3, 2, 1] 1 3 1-2-3");
  CHECK(render("{{ [{'a':1},{'a':2},{'b':3}] | selectattr('a') | list }} {{ [{'a':1},{'a':2}] | map(attribute='a') | list }} "
               "{{ [1,2,3,4] | select('even') | list }} {{ [1,2,3] | reject('odd') | list }}") ==
        "[{'a': 1}, {'a': 2}] [1, 2] [2, 4] [2]");
  CHECK(render("{{ [{'t':'x'},{'t':'y'}] | selectattr('t', 'equalto', 'y') | list }} {{ [{'t':'x'}] | rejectattr('t', 'in', ['x']) | list }}") ==
        "[{'t': 'y'}] []");
  CHECK(render("{{ [1,2] | length }} {{ [1,2] | count }} {{ 3.7 | int }} {{ '42' | int }} {{ 'x' | int }} {{ 2 | float }} "
               "{{ 2.567 | round(2) }} {{ -3 | abs }}") == "2 2 3 42 0 2.0 2.57 3");
  CHECK(render("{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}") == "a\n  b|  a\n  b");
  CHECK(render("{{ [1,2,3,4,5] | batch(2) | list }} {{ 'one two  three' | wordcount }} {{ 'x' | center(5) }}|") ==
        "[[1, 2], [3, 4], [5]] 3   x  |");
  CHECK(render("{{ 'a<b' | e }} {{ 'q' | safe + '\"' }} {{ ' x\u3000' | trim }}|") == "a&lt;b q&#34; x|");
  CHECK_THROWS_WITH(render("{{ 1 | no_such_filter }}"), Catch::Contains("No filter named 'no_such_filter'"));
  CHECK_THROWS_AS(render("{{ [1] | map('string') | tojson }}"), TemplateError);  // a generator, as in Python
}

TEST_CASE("jinja tojson is Hugging Face's json.dumps with ensure_ascii off", "[cpu]") {
  CHECK(render("{{ {'a': 'é\"\\n', 'b': none, 'c': 1.5, 'd': [true]} | tojson }}") ==
        "{\"a\": \"é\\\"\\n\", \"b\": null, \"c\": 1.5, \"d\": [true]}");
  CHECK(render("{{ {'a': [1,{'b':2}], 'e': {}} | tojson(indent=2) }}") ==
        "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ],\n  \"e\": {}\n}");
  CHECK(render("{{ x | tojson(separators=(',', ':')) }}", {{"x", {{"z", 1}, {"a", {1, 2}}}}}) == "{\"z\":1,\"a\":[1,2]}");
  CHECK_THROWS_AS(render("{{ nothing | tojson }}"), TemplateError);
}

TEST_CASE("jinja string and dict methods", "[cpu]") {
  CHECK(render("{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'xa'.lstrip('x') }}|{{ 'ax'.rstrip('x') }}|"
               "{{ 'a b  c'.split() }}|{{ 'a,b'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}") ==
        "x|a|a|a|['a', 'b', 'c']|['a', 'b']|['a', 'b,c']");
  CHECK(render("{{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('x','c')) }} {{ 'a-b'.replace('-', '+') }} "
               "{{ '{} and {}'.format(1, 'x') }} {{ 'héllo'.find('l') }} {{ 'aXa'.count('a') }}") == "True True a+b 1 and x 2 2");
  CHECK(render("{{ {'a':1}.get('a') }} {{ {'a':1}.get('b') }} {{ {'a':1}.get('b', 5) }} {{ {'a':1}.keys() | list }} "
               "{{ {'a':1}.values() | list }}") == "1 None 5 ['a'] [1]");
  CHECK(render("{{ {0: 'zero', 512: 'x'}[512] }}") == "x");
  CHECK_THROWS_WITH(render("{% set l = [] %}{{ l.append(1) }}"),
                    Catch::Contains("access to attribute 'append' of 'list' object is unsafe."));
}

TEST_CASE("jinja errors name the place", "[cpu]") {
  CHECK(error_of("a\n{% if x %}\nb") == "line 3, column 2: unexpected end of template, expected 'elif' or 'else' or 'endif'");
  CHECK(error_of("{{ 1 + }}") == "line 1, column 8: unexpected '}}'");
  CHECK(error_of("x\n\n  {{ 'a' + 1 }}") == "line 3: unsupported operand type(s) for +: 'str' and 'int'");
  CHECK(error_of("{% frobnicate %}") == "line 1, column 4: unknown tag 'frobnicate'");
  CHECK(error_of("{% break %}") == "line 1, column 4: 'break' outside of a for loop");
  CHECK(error_of("{{ 'abc }}").find("line 1, column 4: unexpected end of string") == 0);
  try {
    render("{% if not ok %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}");
    FAIL("no exception");
  } catch (const RaisedException& e) {
    CHECK(std::string(e.what()) == "Conversation roles must alternate");
  }
  CHECK_THROWS_WITH(render("{% for i in range(100000) %}{% for j in range(1000) %}{{ 'x' * 1000 }}{% endfor %}{% endfor %}"),
                    Catch::Contains("output exceeds"));
  const std::string deep(500, '('), closing(500, ')');
  CHECK_THROWS_WITH(render("{{ " + deep + "1" + closing + " }}"), Catch::Contains("nested too deeply"));
}

TEST_CASE("jinja hostile templates fail with TemplateError, never crash", "[cpu]") {
  // Cases a mutation fuzzer (random edits of the shared templates, under ASan) found.
  CHECK_THROWS_AS(render("{{ '{99999999999999999999}'.format(1) }}"), TemplateError);
  CHECK_THROWS_AS(render("{{ 'x' | indent('a' | int + 'b') }}"), TemplateError);
  CHECK_THROWS_AS(render("{{ [1] | batch('two') | list }}"), TemplateError);
  CHECK_THROWS_WITH(render("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}"), Catch::Contains("recursion depth"));
  CHECK_THROWS_WITH(render("{{ 2 ** 99999999999 }}"), Catch::Contains("overflow"));
  CHECK(render("{{ 3 ** 5 }} {{ (-2) ** 3 }} {{ 2 ** 0 }}") == "243 -8 1");
  CHECK_THROWS_WITH(render("{{ 'ab' * 99999999999 }}"), Catch::Contains("exceeds"));
  CHECK(render("{% for x in [[1]] recursive %}{% set ns = namespace(l=loop) %}{{ x }}{% endfor %}") == "[1]");
}

TEST_CASE("jinja strftime_now uses Options::now, else SOURCE_DATE_EPOCH", "[cpu]") {
  Options opt;
  opt.now = 1768480496;  // 2026-01-15 12:34:56 UTC
  CHECK(render("{{ strftime_now('%Y-%m-%d %H:%M:%S') }} {{ strftime_now('%d %b %Y') }}", Json::object(), opt) ==
        "2026-01-15 12:34:56 15 Jan 2026");
  ::setenv("SOURCE_DATE_EPOCH", "0", 1);
  CHECK(render("{{ strftime_now('%Y-%m-%d') }}") == "1970-01-01");
  ::setenv("SOURCE_DATE_EPOCH", "soon", 1);
  CHECK_THROWS_WITH(render("{{ strftime_now('%Y') }}"), Catch::Contains("SOURCE_DATE_EPOCH"));
  ::unsetenv("SOURCE_DATE_EPOCH");
  CHECK(render("{{ strftime_now('%Y') | int > 2000 }}") == "True");
}

TEST_CASE("jinja templates move and render many times", "[cpu]") {
  Template a("{{ messages[0].content }}{{ bos_token }}");
  Template b = std::move(a);
  const Json ctx = Json::parse(R"({"messages":[{"role":"user","content":"hi"}],"bos_token":"<s>"})");
  CHECK(b.render(ctx) == "hi<s>");
  CHECK(b.render(ctx) == "hi<s>");
  CHECK_THROWS_AS(b.render(Json::array()), TemplateError);
}
