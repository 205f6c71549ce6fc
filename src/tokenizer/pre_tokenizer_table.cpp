// The pre-tokenizer table (pre_tokenizer_table.h). Regex lists are named once here and the
// names point at them; flags follow llama.cpp's load() for the same name.

#include "tokenizer/pre_tokenizer_table.h"

namespace llmctl {

namespace {

// ---- the regex lists --------------------------------------------------------------------

// GPT-2's pattern; llama.cpp drops the final |\s+ (text no regex matches becomes a piece of
// its own anyway, so the splits are the same).
const char* const kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
const char* const kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// The four cased-word alternatives of GPT-4o-style patterns, without the digit part.
#define CASED_WORDS(L, M)                                                                    \
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}" M "]*[\\p{Ll}\\p{Lm}\\p{Lo}" M "]+" L \
  "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}" M "]+[\\p{Ll}\\p{Lm}\\p{Lo}" M "]*" L
#define CONTRACTION_OPT "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
const char* const kPoro = R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re";
const char* const kNewlines = R"re([^\n]+|[\n]+)re";

struct ListDef {
  const char* id;
  std::vector<std::string> patterns;
};

const std::vector<ListDef>& lists() {
  static const std::vector<ListDef> defs = {
      {"default",
       {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"}},
      {"gpt2", {kGpt2}},
      {"llama3", {kLlama3}},
      {"jais2",
       {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re"}},
      {"deepseek-llm",
       {"[\r\n]",
        R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re",
        R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re", R"re(\s+$)re", R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re", R"re(\p{N}+)re"}},
      {"deepseek-v3",
       {R"re(\p{N}{1,3})re", R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
        R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"youtu",
       {R"re([\x{AC00}-\x{D7A3}\x{3131}-\x{318E}]+|[\x{FF01}\x{2026}\x{201C}\x{201D}\x{2018}\x{2019}\x{2014}\x{FF1A}\x{FF1B}\x{FF0C}\x{3001}-\x{303F}\x{FE30}-\x{FE4F}]+|[\x{3105}-\x{312F}]+|[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
        CASED_WORDS(CONTRACTION_OPT, "\\p{M}") "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
      {"deepseek-coder",
       {"[\r\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re", R"re(\p{N})re"}},
      {"falcon", {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, R"re([0-9][0-9][0-9])re"}},
      {"starcoder", {R"re(\p{N})re", kGpt2}},
      {"qwen2", {kQwen2}},
      {"qwen35",
       {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"poro", {kPoro}},
      {"viking", {kPoro, R"re(\p{N})re"}},
      {"tekken",
       {CASED_WORDS("", "\\p{M}") "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
      {"chameleon",
       {R"re(<sentinel:[0-9]+>)re", R"re((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)re", "([\\t\\n]|    |  )",
        R"re(\p{N})re", R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2}},
      {"gpt-4o",
       {CASED_WORDS(CONTRACTION_OPT, "\\p{M}") "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
      // llama.cpp's own variant of the GPT-4o pattern: a letter or mark that is not a-z
      // (resp. A-Z) in place of the case classes, so combining marks stay with their letter.
      {"granite-embed-multi-97m",
       {R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      // tokenizer.json has \d{1,3}(?=(?:\d{3})*\b); \b after a digit is "no word character
      // next", spelled out with Oniguruma's (HF tokenizers') word class, since PCRE2's UCP
      // \w also counts \p{No} (superscripts, circled digits) as word characters.
      {"tiny_aya",
       {R"re(\d{1,3}(?=(?:\d{3})*(?![\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])))re",
        CASED_WORDS(CONTRACTION_OPT, "\\p{M}") "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
      // Kimi K2 (tokenization_kimi.py): Han runs alone, and the cased-word classes without
      // Han ("&&[^\p{Han}]" there, a negative lookahead per character here). llama.cpp
      // hand-codes the same pattern. \p{Han} is Script_Extensions in PCRE2 as in tiktoken's
      // Rust regex (so U+301C WAVE DASH counts as Han); Python's regex needs \p{scx=Han}.
      {"kimi-k2",
       {R"re([\p{Han}]+|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"superbpe", {R"re(\p{N}+)re", R"re((?=(\d{3})+(?!\d)))re"}},
      // tokenizer.json has possessive quantifiers (?+ ++); llama.cpp runs them greedy.
      {"bailingmoe",
       {R"re('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re"}},
      {"seed-coder",
       {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      // Digits in groups of three from the right, the leading group 1-2 long (llama.cpp
      // hand-codes it as \p{AFMoE_digits}).
      {"afmoe",
       {R"re(\d{1,3}(?=(?:\d{3})*(?!\d)))re",
        R"re([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{8C48}-\x{FAFF}\x{3040}-\x{309F}\x{30A0}-\x{30FF}\x{FF65}-\x{FF9F}\x{2F00}-\x{2FDF}\x{E40}-\x{E7F}\x{E80}-\x{EFF}\x{1780}-\x{17FF}\x{1000}-\x{109F}\x{AA60}-\x{AA7F}\x{A9E0}-\x{A9FF}\x{AC00}-\x{D7AF}\x{1100}-\x{11FF}]+)re",
        R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"laguna", {kNewlines, kQwen2}},
      {"exaone-moe",
       {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re"}},
      {"newlines", {kNewlines}},
      {"minicpm5",
       {R"re(\p{N}{1,3})re",
        R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"whitespace", {R"re(\S+)re"}},
  };
  return defs;
}

#undef CASED_WORDS
#undef CONTRACTION_OPT

const std::vector<std::string>& list_patterns(const char* id) {
  for (const ListDef& d : lists())
    if (std::string_view(d.id) == id) return d.patterns;
  static const std::vector<std::string> none;
  return none;  // a typo in the table below; the table test catches it (no patterns)
}

// ---- the names --------------------------------------------------------------------------

enum Flag : unsigned {
  kIgnoreMerges = 1u << 0,
  kAddBos = 1u << 1,
  kKeepSpaces = 1u << 2,  // clean_spaces = false
  kRawUtf8 = 1u << 3,
  kEscapeSpaces = 1u << 4,
  kAddSep = 1u << 5,
  kNoBos = 1u << 6,
};

struct NameDef {
  const char* name;
  const char* list;
  unsigned flags;
};

constexpr NameDef kNames[] = {
    {"default", "default", 0},
    {"minicpm5", "minicpm5", kIgnoreMerges},
    {"llama3", "llama3", kIgnoreMerges | kAddBos},
    {"llama-v3", "llama3", kIgnoreMerges | kAddBos},
    {"llama-bpe", "llama3", kIgnoreMerges | kAddBos},
    {"falcon3", "llama3", kIgnoreMerges | kAddBos},
    {"falcon-h1", "llama3", kIgnoreMerges | kAddBos},
    {"pixtral", "llama3", kIgnoreMerges | kAddBos},
    {"midm-2.0", "llama3", kIgnoreMerges | kAddBos},
    {"lfm2", "llama3", kIgnoreMerges | kAddBos},
    {"jina-v5-nano", "llama3", kIgnoreMerges | kAddBos},
    {"deepseek-llm", "deepseek-llm", kKeepSpaces},
    {"deepseek-coder", "deepseek-coder", kKeepSpaces},
    {"deepseek-v3", "deepseek-v3", kKeepSpaces},
    {"youtu", "youtu", kKeepSpaces | kIgnoreMerges},
    {"falcon", "falcon", 0},
    {"mpt", "gpt2", 0},
    {"starcoder", "starcoder", 0},
    {"gpt-2", "gpt2", 0},
    {"phi-2", "gpt2", 0},
    {"jina-es", "gpt2", 0},
    {"jina-de", "gpt2", 0},
    {"gigachat", "gpt2", 0},
    {"jina-v2-es", "gpt2", 0},
    {"jina-v2-de", "gpt2", 0},
    {"a.x-4.0", "gpt2", 0},
    {"mellum", "gpt2", 0},
    {"modern-bert", "gpt2", 0},
    {"jais-2", "jais2", 0},
    {"gemma4", "newlines", kRawUtf8 | kEscapeSpaces},
    {"granite-embed-multi-311m", "newlines", kRawUtf8 | kEscapeSpaces},
    {"sarvam-moe", "newlines", kRawUtf8 | kEscapeSpaces | kKeepSpaces},
    {"jina-v1-en", "gpt2", kAddSep},
    {"jina-v2-code", "gpt2", kAddSep},
    {"roberta-bpe", "gpt2", kAddSep},
    {"whitespace", "whitespace", kRawUtf8},
    {"refact", "starcoder", 0},
    {"command-r", "starcoder", kKeepSpaces},
    {"qwen2", "qwen2", kKeepSpaces},
    {"deepseek-r1-qwen", "qwen2", kKeepSpaces},
    {"kormo", "qwen2", kKeepSpaces},
    {"f2llmv2", "qwen2", kKeepSpaces},
    {"qwen35", "qwen35", kKeepSpaces},
    {"stablelm2", "qwen2", 0},
    {"olmo", "gpt2", 0},
    {"dbrx", "llama3", 0},
    {"smaug-bpe", "llama3", 0},
    {"poro-chat", "poro", kKeepSpaces},
    {"glm4", "llama3", kNoBos},
    {"chatglm-bpe", "llama3", kNoBos},
    {"viking", "viking", kKeepSpaces},
    {"jais", "gpt2", 0},
    {"tekken", "tekken", kKeepSpaces | kIgnoreMerges | kAddBos},
    {"smollm", "starcoder", kKeepSpaces},
    {"codeshell", "starcoder", 0},
    {"bloom", "poro", 0},
    {"gpt3-finnish", "poro", 0},
    {"exaone", "starcoder", 0},
    {"exaone4", "gpt2", 0},
    {"exaone-moe", "exaone-moe", 0},
    {"chameleon", "chameleon", kAddBos | kKeepSpaces},
    {"minerva-7b", "starcoder", 0},
    {"megrez", "qwen2", 0},
    {"gpt-4o", "gpt-4o", kKeepSpaces},
    {"llama4", "gpt-4o", kKeepSpaces},
    {"kanana2", "gpt-4o", kKeepSpaces},
    {"talkie", "gpt-4o", kKeepSpaces},
    {"granite-embed-multi-97m", "granite-embed-multi-97m", kKeepSpaces | kIgnoreMerges},
    {"tiny_aya", "tiny_aya", kKeepSpaces},
    {"cohere2moe", "tiny_aya", kKeepSpaces},
    {"superbpe", "superbpe", kKeepSpaces},
    {"trillion", "gpt2", kKeepSpaces},
    {"granite-docling", "gpt2", kKeepSpaces},
    {"bailingmoe", "bailingmoe", kKeepSpaces},
    {"bailingmoe2", "bailingmoe", kKeepSpaces},
    {"llada-moe", "bailingmoe", kKeepSpaces},
    {"seed-coder", "seed-coder", kKeepSpaces},
    {"hunyuan", "qwen2", kKeepSpaces},
    {"hunyuan-dense", "deepseek-v3", kKeepSpaces},
    {"joyai-llm", "deepseek-v3", kKeepSpaces},
    {"kimi-k2", "kimi-k2", kKeepSpaces},
    {"grok-2", "qwen2", kKeepSpaces},
    {"afmoe", "afmoe", kKeepSpaces},
    {"laguna", "laguna", kKeepSpaces},
    {"minimax-m2", "gpt-4o", kKeepSpaces},
    {"solar-open", "qwen2", kKeepSpaces},
    {"mellum2", "starcoder", 0},
};

}  // namespace

const std::vector<PreTokenizerSpec>& pre_tokenizer_table() {
  static const std::vector<PreTokenizerSpec> table = [] {
    std::vector<PreTokenizerSpec> out;
    for (const NameDef& n : kNames) {
      PreTokenizerSpec s;
      s.name = n.name;
      s.list = n.list;
      s.patterns = list_patterns(n.list);
      s.ignore_merges = (n.flags & kIgnoreMerges) != 0;
      s.add_bos = (n.flags & kAddBos) != 0;
      s.clean_spaces = (n.flags & kKeepSpaces) == 0;
      s.byte_encode = (n.flags & kRawUtf8) == 0;
      s.escape_whitespaces = (n.flags & kEscapeSpaces) != 0;
      s.add_sep = (n.flags & kAddSep) != 0;
      s.no_bos = (n.flags & kNoBos) != 0;
      out.push_back(std::move(s));
    }
    return out;
  }();
  return table;
}

}  // namespace llmctl
