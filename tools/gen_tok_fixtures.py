#!/usr/bin/env python3
"""gen_tok_fixtures.py - writes tests/fixtures/tokenizer/strings.json, the tokenizer oracle
corpus: [{"name": ..., "text": ...} | {"name": ..., "b64": ...}].  b64 carries byte strings
that are not valid UTF-8.  Re-run after editing; the JSON is what tests read."""
import base64, json, sys

S = []
def add(name, text): S.append({"name": name, "text": text})
def addb(name, data): S.append({"name": name, "b64": base64.b64encode(data).decode()})

prose = [
    "Hello, how are you doing today?",
    "The quick brown fox jumps over the lazy dog.",
    "Hello world, I've 12345 dogs!\n\n  ok",
    "It's a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.",
    "I'm sure they're right; we'll see what you've done and he'd said.",
    "I'M SURE THEY'RE RIGHT; WE'LL SEE WHAT YOU'VE DONE AND HE'D SAID.",
    "Don't stop believing. Won't you? Can't we? Shouldn't they?",
    "e.g. i.e. etc. Mr. Smith vs. Dr. Jones at 3 p.m.",
    "Café résumé naïve coöperate façade jalapeño",
    " Café",
    "The year 2024 had 366 days; π ≈ 3.14159265358979.",
    "Email me at someone@example.com or visit https://example.org/path?q=1&r=2#frag",
    "“Smart quotes” and ‘single’ ones — em dash – en dash … ellipsis",
    "ALL CAPS SENTENCE WITH NUMBERS 1234 AND symbols #@!",
    "camelCaseIdentifier snake_case_identifier kebab-case-identifier",
    "A sentence with trailing space ",
    " A sentence with leading space",
    "   three leading spaces and three trailing   ",
    "a  b   c    d",
    "Über Straße groß Ärger Öl",
    "Hello , world . How ' s it ? Fine !",
    "it 's he 'll they 're we 've I 'm",
]
for i, p in enumerate(prose): add(f"prose{i}", p)

code = [
    "def add(a, b):\n    return a + b\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (size_t i = 0; i < n; i++) { x[i] = y[i] * 2; }",
    "const f = async (x) => { await g(x?.y ?? 0); };",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "<div class=\"a\"><span>text</span></div>",
    "{\"key\": [1, 2.5, true, null], \"nested\": {\"k\": \"v\"}}",
    "#include <stdio.h>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
    "if x == 1:\n\tpass\nelif x != 2:\n    print('no')",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "    indented four\n        indented eight\n",
    "x+=1;y-=2;z*=3;w/=4;v%=5;u<<=1;t>>=2;",
    "// comment\n/* block\n   comment */\n",
    "$ ls -la | grep '^d' > out.txt 2>&1",
    "arr[::-1] + arr[1:3] - {k: v for k, v in d.items()}",
]
for i, c in enumerate(code): add(f"code{i}", c)

scripts = {
    "hindi": ["नमस्ते, आप कैसे हैं?", "भारत एक विशाल देश है जिसकी संस्कृति बहुत पुरानी है।", "मैं हिंदी में लिख रहा हूँ, और यह वाक्य थोड़ा लंबा है।", "क्षत्रिय ज्ञान श्री त्र द्ध"],
    "bengali": ["আমি বাংলায় গান গাই।", "বাংলাদেশ ও পশ্চিমবঙ্গে বাংলা ভাষা প্রচলিত।", "আপনি কেমন আছেন?"],
    "tamil": ["வணக்கம், நீங்கள் எப்படி இருக்கிறீர்கள்?", "தமிழ் ஒரு பழமையான மொழி.", "கணினி அறிவியல்"],
    "telugu": ["నమస్కారం, మీరు ఎలా ఉన్నారు?", "తెలుగు భాష చాలా మధురమైనది.", "హైదరాబాద్ నగరం"],
    "kannada": ["ನಮಸ್ಕಾರ, ನೀವು ಹೇಗಿದ್ದೀರಿ?", "ಕನ್ನಡ ಭಾಷೆ ಸುಂದರವಾಗಿದೆ.", "ಬೆಂಗಳೂರು"],
    "malayalam": ["നമസ്കാരം, സുഖമാണോ?", "മലയാളം ഒരു ദ്രാവിഡ ഭാഷയാണ്.", "കേരളം"],
    "gujarati": ["નમસ્તે, તમે કેમ છો?", "ગુજરાતી ભાષા સુંદર છે.", "અમદાવાદ"],
    "punjabi": ["ਸਤ ਸ੍ਰੀ ਅਕਾਲ, ਤੁਸੀਂ ਕਿਵੇਂ ਹੋ?", "ਪੰਜਾਬੀ ਗੁਰਮੁਖੀ ਲਿਪੀ ਵਿੱਚ ਲਿਖੀ ਜਾਂਦੀ ਹੈ।", "ਅੰਮ੍ਰਿਤਸਰ"],
    "odia": ["ନମସ୍କାର, ଆପଣ କେମିତି ଅଛନ୍ତି?", "ଓଡ଼ିଆ ଏକ ପ୍ରାଚୀନ ଭାଷା।", "ଭୁବନେଶ୍ୱର"],
    "marathi": ["नमस्कार, तुम्ही कसे आहात?", "महाराष्ट्राची राजधानी मुंबई आहे.", "मराठी भाषा"],
    "urdu": ["السلام علیکم، آپ کیسے ہیں؟", "اردو ایک خوبصورت زبان ہے۔", "پاکستان اور ہندوستان"],
    "arabic": ["مرحبا، كيف حالك؟", "اللغة العربية جميلة جداً.", "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ"],
    "cjk": ["你好，世界！", "我今天很高兴见到你。", "日本語のテキストです。", "こんにちは、カタカナ、ひらがな", "한국어 문장입니다.", "中文和English混合mixed文本123", "東京都渋谷区"],
    "other": ["Привет, как дела?", "Γειά σου Κόσμε", "שלום עולם", "สวัสดีครับ", "Xin chào thế giới", "Ἀρχὴ ἥμισυ παντός"],
}
for k, arr in scripts.items():
    for i, t in enumerate(arr): add(f"{k}{i}", t)
add("mixed_indic", "Hindi हिंदी, Tamil தமிழ், Urdu اردو and English in one line.")

emoji = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👩🏾‍💻 coding", "🇮🇳🇺🇸🇯🇵", "I ❤️ tokenizers 🎉🎉🎉",
         "✊🏻✊🏼✊🏽✊🏾✊🏿", "🧑‍🤝‍🧑", "emoji🙂inline🙃text", "1️⃣2️⃣3️⃣", "👁️‍🗨️", "🐕‍🦺 and 🐈‍⬛"]
for i, e in enumerate(emoji): add(f"emoji{i}", e)

ws = ["", " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "a\r\nb\r\n",
      " \n ", "\n \n", "a  b\t\tc\n\n\nd", "line1\tcol2\nline2\n\nline4", "  \t  \n  ", "x\n\n\n\n\n\n\n\n\ny",
      "trailing newline\n", "\nleading newline", "spaces    \n    after", "\u00a0nbsp\u00a0", "\u3000ideographic space",
      "\u2003em space", "a\u200bzero width", "\v\f", "tab\tseparated\tvalues", " " * 40, "\n" * 40, "\t" * 33,
      "mixed \t \n \r\n end", "\r", "a\rb"]
for i, w in enumerate(ws): add(f"ws{i}", w)

nums = ["0", "7", "42", "123", "1234", "12345", "123456789", "3.14159", "1,000,000", "-273.15",
        "99999999999999999999", "2024-11-30", "10:45:00", "1e-10", "0x7FFFFFFF", "١٢٣٤٥", "१२३४५",
        "Ⅻ", "½ ¾", "007", "1st 2nd 3rd 4th", "v1.2.3-rc4", "+91 98765 43210", "3,141,592,653,589,793,238"]
for i, n in enumerate(nums): add(f"num{i}", n)

markers = ["<|im_start|>user\nhi<|im_end|>", "<think>x</think>", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
           "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n", "<bos>text<eos>", "<bos><bos>", "<|endoftext|>",
           "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
           "<|turn>user\nWhat?<turn|>", "<pad><mask><unk>", "</s><s>", "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
           "text<|im_end|>more", "<|im_start|><|im_start|>", "<|im_start", "im_start|>", "<table><tr><td>cell</td></tr></table>",
           "<start_of_image>", "<unused0><unused1>", "[multimodal]", "<0x41>", "<|reserved_special_token_0|>", "<|eot_id|><|eot_id|>",
           "a<think>b</think>c<tool_response>d</tool_response>", "<code>x = 1</code>"]
for i, m in enumerate(markers): add(f"marker{i}", m)

misc = ["!!!???...", "------", "======", "********", "'''", "\"\"\"", "'s", "'S", "'ll'LL", "a'b'c",
        "@#$%^&*()", "[]{}()<>", "~`|\\", "¡¿", "©®™", "°C °F", "€100 £50 ¥1000 ₹500", "→ ← ↑ ↓", "∑∫∂√∞",
        "a\x01\x02!b", "\x1b[31mred\x1b[0m", "\x7f", "x\x1cy\x1fz", "\u0085next line", "ﬁ ﬂ ligatures", "Å Å (NFC vs NFD)",
        "e\u0301 vs é", "𐌀 old italic", "rare: 𐌀 old italic letter", "𝕳𝖊𝖑𝖑𝖔", "\ufeffBOM at start", "\ufffd replacement",
        "a" * 100, "ab" * 60, "Supercalifragilisticexpialidocious", "pneumonoultramicroscopicsilicovolcanoconiosis",
        "https://" + "x" * 50 + ".com", "—" * 20, "..." * 15, "😀" * 10, "ह" * 30]
for i, m in enumerate(misc): add(f"misc{i}", m)

invalid = [b"\xff", b"\xfe\xff", b"abc\x80def", b"\xc3\x28", b"\xe2\x82", b"\xe2\x82\x28", b"\xf0\x9f\x98",
           b"\xf0\x28\x8c\xbc", b"ok \xc0\xaf slash", b"\xed\xa0\x80 surrogate", b"\xf5\x80\x80\x80 too big",
           b"mixed \xe0\xa4 hindi \xe0\xa4\xa8", b"\x80\x80\x80", b"tail \xc3", b"<|im_start|>\xff<|im_end|>",
           b"\xf8\x88\x80\x80\x80", b"caf\xe9", b"\xef\xbb\xbf\xff"]
for i, b in enumerate(invalid): addb(f"invalid{i}", b)

long_para = ("Tokenizers split text into pieces. " * 8 + "\n" + "भारत में कई भाषाएँ बोली जाती हैं। " * 5 + "\n" +
             "数字 1234567890 和符号 !@#。" * 4)
add("long_mixed", long_para)

# the DeepSeek / Kimi pre-tokenizers' distinctions: CJK and kana runs (and Kimi's Han blocks
# beyond the BMP), Hangul, full-width forms and U+3000, digits in groups of 1-3 inside CJK,
# ASCII punctuation glued to letters, the cased-letter class of deepseek-llm (micro sign,
# titlecase, Kelvin sign, Cherokee, Georgian, Armenian), trailing whitespace at the end,
# emoji between scripts
regex = ["中文English混合123456文本。", "日本語とEnglishとカタカナ：ﾃｽﾄ、한글123",
         "Ｆｕｌｌｗｉｄｔｈ\u3000ＡＢＣ！１２３", "价格是1234567元，约$1,234.56。",
         "a.b,c!d?e:f;g .NET ,hello 'quoted' \"x\" (paren)x", "𠀀𠀁 Ext-B 㐀 ExtA 豈 compat 〇",
         "Ωmega µs ǅ ſ \u212a Ⴀ ᏣᎳᎩ Աբ Ꭰ", "end with spaces  \n  ", "emoji😀中文😀123🎉end",
         "第一行\n\n第二行\r\n  third 　full", "I'M 'Quoted' can't DON'T ΆΈ",
         "你好 世界，中国 人民 Hello 中文 world 日本 のテキスト 한국 어"]
for i, r in enumerate(regex): add(f"regex{i}", r)

json.dump(S, open(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/tokenizer/strings.json", "w"),
          ensure_ascii=True, indent=0)
print(len(S), "strings", file=sys.stderr)
