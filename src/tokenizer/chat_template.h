#pragma once
// Chat templates: the four prompt formats `llmctl run -i` and `--batch` "messages" support,
// rendered in C++ (no Jinja engine) to exactly the strings the models' own Jinja templates
// produce (tests/fixtures/chat_templates.json, rendered by tools/gen_chat_fixture.py):
//
//   llama2  (Llama-2-chat)
//     <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] ...
//   llama3  (Llama-3-Instruct)
//     <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>...
//   chatml  (Qwen2, OpenHermes)
//     <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
//   zephyr  (zephyr-7b-beta)
//     <|system|>\n{content}</s>\n<|user|>\n{content}</s>\n<|assistant|>\n
//
// The rendered text holds special-token text: tokenize it with
// Tokenizer::encode(text, /*add_bos=*/false, /*parse_special=*/true). BOS is part of the text
// when the template puts it there (bos_text); pass bos_text = "" and add_bos = true instead
// when the tokenizer should add it (the same ids for llama3/zephyr-style single-BOS prompts).
//
// Known approximations, by design: Qwen2's template adds "You are a helpful assistant." as the
// system message when the conversation has none, plain ChatML does not (llmctl renders plain
// ChatML; give a system message to get Qwen2's exact prompt). Mistral templates are detected as
// llama2 (their [INST] marker) but Mistral puts BOS once and no spaces around the reply. Llama
// 3.1+ templates (date header, tools) are detected as llama3 and rendered in the 3.0 format.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmctl {

class Tokenizer;

enum class ChatTemplate { Llama2, Llama3, ChatML, Zephyr };
enum class ChatRole { System, User, Assistant };

struct ChatMessage {
  ChatRole role = ChatRole::User;
  std::string content;
};

// "llama2", "llama3", "chatml", "zephyr" (ASCII case ignored); nullopt otherwise.
std::optional<ChatTemplate> chat_template_from_name(std::string_view name);
const char* chat_template_name(ChatTemplate t);
// "system", "user", "assistant" (exact); nullopt otherwise.
std::optional<ChatRole> chat_role_from_name(std::string_view name);
const char* chat_role_name(ChatRole r);

// The family of a GGUF tokenizer.chat_template (Jinja source) by its distinctive markers:
// "<|start_header_id|>" -> llama3, "<|im_start|>" -> chatml, "[INST]" -> llama2 (Llama 2,
// Mistral), "<|user|>" + "<|assistant|>" with the user turn closed by an end token (eos_token,
// "</s>" or "<|endoftext|>") -> zephyr (Phi-3's "<|end|>" and Falcon 3's newline-closed turns
// are not zephyr). Anything else, the empty string included: nullopt, and the CLI says
// kUnrecognizedChatTemplate.
std::optional<ChatTemplate> detect_chat_template(std::string_view jinja);
inline constexpr const char* kUnrecognizedChatTemplate =
    "unrecognized chat template; pass --chat-template llama2|llama3|chatml|zephyr";

// The prompt for `messages`. add_generation_prompt appends the assistant header (llama3,
// chatml; zephyr only after at least one message, as its template does; llama2's prompt
// already ends with "[/INST]"). bos_text/eos_text are the vocabulary's BOS/EOS token texts
// (llama2 and zephyr use eos_text to close turns; llama3 and chatml use their own tokens).
// Throws Error where the model's template raises: llama2 needs user and assistant turns to
// alternate starting with the user, after at most one leading system message, and at least
// one message.
std::string render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, const std::string& bos_text,
                        const std::string& eos_text);

// The text of the token that ends an assistant turn: "<|eot_id|>" (llama3), "<|im_end|>"
// (chatml), eos_text (llama2, zephyr). Generation should stop there.
std::string chat_turn_end_text(ChatTemplate t, const std::string& eos_text);
// The ids that end an assistant turn in this vocabulary: the turn-end token (found among the
// special tokens by its text) and EOS, without duplicates or missing (-1) ids.
std::vector<int32_t> chat_stop_ids(ChatTemplate t, const Tokenizer& tok);

// Python's str.strip() (Jinja's trim and .strip()): removes leading and trailing characters
// that Python calls whitespace (ASCII and Unicode spaces, e.g. U+3000, U+00A0, U+2028), which
// llama2 and llama3 apply to message contents. Invalid UTF-8 is never whitespace.
std::string_view python_strip(std::string_view s);

}  // namespace llmctl
