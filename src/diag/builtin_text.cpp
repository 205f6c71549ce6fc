// The built-in texts (builtin_text.h). Written for llmctl; plain ASCII so every vocabulary
// encodes them without byte fallback surprises.
#include "diag/builtin_text.h"

#include "core/error.h"

namespace llmctl {

namespace {

constexpr std::string_view kStories =
    "Once upon a time, there was a little girl named Lily. She lived in a small house with "
    "her mom and dad. Lily loved to play outside in the big green park near her house.\n"
    "One day, Lily saw a red ball under a tree. She ran to the ball and picked it up. \"This "
    "is a nice ball,\" she said. Then she saw a boy who was sad. His name was Tom. \"Is this "
    "your ball?\" Lily asked. Tom nodded and smiled. Lily gave the ball to Tom, and they "
    "played together all day. They were very happy.\n"
    "When the sun went down, Lily went home. Her mom gave her a warm bowl of soup. Lily told "
    "her mom about Tom and the red ball. Her mom said, \"You were very kind today, Lily.\" "
    "Lily smiled and went to bed.\n\n"
    "Ben was a small dog with a long tail. He liked to run and jump in the grass. One morning, "
    "Ben saw a big cat on the fence. The cat looked at Ben and said, \"Meow!\" Ben barked "
    "and wagged his tail. He wanted to be friends with the cat.\n"
    "The cat jumped down from the fence. \"My name is Kitty,\" said the cat. \"Do you want to "
    "play?\" Ben was so happy. They ran around the yard and played with a stick. Then it "
    "started to rain. Ben and Kitty ran under a big tree. They sat close together and watched "
    "the rain fall.\n"
    "After the rain stopped, they saw a rainbow in the sky. \"Look at all the colors!\" said "
    "Ben. Kitty purred. From that day on, Ben and Kitty were best friends.\n\n"
    "Sam had a little boat. He wanted to take it to the pond. He asked his dad, \"Can we go "
    "to the pond today?\" His dad said yes. They walked to the pond together. Sam put his "
    "boat on the water, and the wind pushed it far away.\n"
    "Sam was scared. \"My boat is going away!\" he cried. His dad took a long stick and "
    "reached for the boat. He pulled it back to the shore. Sam hugged his dad. \"Thank you, "
    "Dad!\" he said. They played with the boat until it was time to go home.\n\n"
    "Mia found a tiny bird in the garden. The bird could not fly because its wing was hurt. "
    "Mia put the bird in a soft box and gave it some water and seeds. Every day she checked "
    "on the bird. After a few days, the bird was strong again. Mia opened the box, and the "
    "bird flew up into the blue sky. Mia waved and said, \"Goodbye, little bird!\" She felt "
    "proud and happy.\n";

constexpr std::string_view kCalibration =
    "Tim liked to build towers with his blocks. He made a very tall tower in his room. His "
    "sister Anna came in and wanted to help. Tim said, \"Be careful, the tower can fall.\" "
    "Anna put one more block on top, and the tower fell down. Anna started to cry. Tim "
    "hugged her and said, \"It is okay. We can build a new one together.\" They built a big "
    "castle with a red door, and their mom took a picture of it.\n\n"
    "There was an old frog who lived by a river. Every day he sat on a rock and sang a song. "
    "One day a little fish swam up to the rock. \"Why do you sing every day?\" asked the "
    "fish. The frog said, \"I sing because the sun is warm and the water is cool.\" The fish "
    "liked the song, so she came back the next day, and the day after that. Soon the frog "
    "and the fish were good friends, and they sang together by the river.\n\n"
    "Lucy wanted to bake a cake for her grandma. She got flour, eggs, milk and sugar. Her dad "
    "helped her mix everything in a big bowl. They put the cake in the oven and waited. The "
    "kitchen smelled sweet. When the cake was ready, Lucy put pink frosting on top. Grandma "
    "came to visit and saw the cake. \"What a beautiful cake!\" she said. They ate it "
    "together, and grandma told Lucy a story about when she was a little girl.\n\n"
    "Max had a shiny new kite. He went to the hill with his friend Sue. The wind was strong, "
    "and the kite went up high. Then the string broke and the kite flew into a tree. Max was "
    "sad. Sue had an idea. She asked a tall man to help. The man reached up and got the "
    "kite. Max said thank you, and Sue tied the string again. The kite flew all afternoon.\n";

}  // namespace

std::string_view builtin_text(std::string_view name) {
  if (name == "stories") return kStories;
  if (name == "calibration") return kCalibration;
  throw Error(fmt::format("no built-in text named '{}' (known: stories, calibration)", name));
}

std::vector<std::string> builtin_text_names() { return {"stories", "calibration"}; }

}  // namespace llmctl
