"""Terms that used to be lost: Latin words inside CJK text, a path's file name, C++ and C#,
accented Latin letters, hyphenated words, words wrapped in underscores, words pasted with invisible
characters inside, and the re-analysis that brings older stores up to date."""

from __future__ import annotations

from mcp import Client

from mcp_memory.config import Settings
from mcp_memory.search.analyzer import ANALYZER_VERSION, Analyzer
from mcp_memory.server import build_server
from tests.conftest import FakeClock, call
from tests.test_reanalysis import make_older

FILLER = [
    "The weekly planning meeting moved to Thursday afternoon",
    "Lunch options near the office include a noodle bar and a bakery",
    "The quarterly report needs two more charts before Friday",
    "Remember to water the plants on the balcony",
]

analyzer = Analyzer()


async def save_all(client: Client, *contents: str) -> list[str]:
    """Save the filler (so query words have a positive idf) and then `contents`; their ids in order."""
    for text in FILLER:
        await call(client, "memory_save", content=text)
    return [str((await call(client, "memory_save", content=text))["id"]) for text in contents]


async def found(client: Client, query: str) -> list[str]:
    return [hit["id"] for hit in (await call(client, "memory_smart_search", query=query))["hits"]]


# -- Latin words written against Chinese or Japanese --------------------------------------------------


def test_a_latin_word_inside_cjk_text_is_a_term_of_its_own() -> None:
    assert analyzer.terms("使用Redis缓存用户数据") == ["使用", "redi", "缓存", "存用", "用户", "户数", "数据"]
    assert analyzer.terms("APIキーを更新した")[:2] == ["api", "キー"]
    assert analyzer.terms("修复了登录bug")[-1] == "bug"


async def test_each_word_of_mixed_latin_and_cjk_text_finds_it(client: Client) -> None:
    redis, api_key = await save_all(client, "使用Redis缓存用户数据", "APIキーを更新した")

    for query in ("Redis", "缓存", "用户数据", "Redis缓存"):
        assert await found(client, query) == [redis], query
    for query in ("更新", "API", "APIキー"):
        assert await found(client, query) == [api_key], query


# -- a path's file name ---------------------------------------------------------------------------


def test_a_path_yields_its_file_name_also_without_a_line_number() -> None:
    assert analyzer.terms("src/app/db.py") == ["src/app/db.py", "db.py", "src", "app", "db", "py"]
    assert {"src/app/db.py", "db.py"} <= set(analyzer.terms("failed at src/app/db.py:42"))
    assert "db.py" in analyzer.terms(r"src\app\db.py")
    assert analyzer.terms("src/app/utils") == ["src/app/utils", "src", "app", "util"]  # a plain word already is one


async def test_a_file_name_finds_the_record_that_names_its_path_first(client: Client) -> None:
    path, line, *_ = await save_all(
        client,
        "Edited src/app/db.py to add pooling",
        "The traceback ends at lib/store/db.py:120",
        "The mobile app stores its cache in a local db",
        "Wrote the py script to dump the db",
    )

    hits = await found(client, "db.py")
    assert set(hits[:2]) == {path, line}
    assert (await found(client, "src/app/db.py"))[0] == path
    assert (await found(client, "lib/store/db.py"))[0] == line


# -- C++, C#, F# ----------------------------------------------------------------------------------


def test_language_names_with_symbols_are_terms() -> None:
    assert analyzer.terms("Prefer C++ over C") == ["prefer", "c++"]
    assert analyzer.terms("C# and F#, not issue#42") == ["c#", "f#", "issue#42", "issu", "42"]
    assert analyzer.terms("C++17 with g++") == ["c++", "17", "g++"]
    assert analyzer.terms("call count++ twice") == ["call", "count++", "count", "twice"]


async def test_cpp_csharp_and_fsharp_each_find_their_own_record(client: Client) -> None:
    cpp, csharp, fsharp, _ = await save_all(
        client,
        "Prefer C++ over C for the engine",
        "The editor plugins are written in C#",
        "F# scripts build the documentation site",
        "Plain C is fine for the firmware",
    )

    assert await found(client, "C++") == [cpp]
    assert await found(client, "C#") == [csharp]
    assert await found(client, "F#") == [fsharp]


# -- accents ----------------------------------------------------------------------------------------


def test_accents_fold_where_people_type_without_them_and_other_marks_stay() -> None:
    assert analyzer.terms("Café résumé naïve") == analyzer.terms("cafe resume naive") == ["cafe", "resum", "naiv"]
    assert analyzer.terms("İstanbul") == analyzer.terms("ISTANBUL") == ["istanbul"]
    assert analyzer.terms("Tiếng Việt") == ["tieng", "viet"]
    # Greek tonos, Hebrew points and Arabic vowel marks are left out in typing and in search alike
    assert analyzer.terms("καφές ΚΑΦΈΣ") == analyzer.terms("καφες καφες")
    assert analyzer.terms("עִבְרִית") == analyzer.terms("עברית") == ["עברית"]
    assert analyzer.terms("العَرَبِيَّة") == analyzer.terms("العربية") == ["العربية"]
    # marks that make another letter stay: kana voicing, Cyrillic й
    assert analyzer.terms("ぎぐ") == ["ぎぐ"]
    assert analyzer.terms("йод и иод") == ["йод", "иод"]


def test_words_written_with_vowel_marks_stay_whole() -> None:
    # Devanagari and Tamil write vowels as combining marks, which `\w` alone does not take
    assert analyzer.terms("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert analyzer.terms("தமிழ் மொழி") == ["தமிழ்", "மொழி"]
    assert analyzer.terms("मैं घर जा रहा हूँ") == ["मैं", "घर", "जा", "रहा", "हूँ"]
    assert analyzer.terms("हिन्दी-भाषा") == ["हिन्दी-भाषा", "हिन्दी", "भाषा"]


def test_thai_lao_khmer_and_myanmar_text_is_bigrammed_by_letter_as_cjk_is() -> None:
    # no spaces between words: a word is found inside a sentence by its bigrams, a letter with its marks
    assert analyzer.terms("ข้าวผัด") == ["ข้า", "าว", "วผั", "ผัด"]
    sentence = analyzer.terms("ฉันชอบกินข้าวผัด")  # "I like to eat fried rice"
    assert set(analyzer.terms("ข้าวผัด")) <= set(sentence)
    assert analyzer.terms("ที่") == ["ที่"]
    assert analyzer.terms("東京タワー") == ["東京", "京タ", "タワ", "ワー"]  # CJK as before


async def test_a_thai_word_finds_the_sentence_it_is_in(client: Client) -> None:
    rice, noodles = await save_all(client, "ฉันชอบกินข้าวผัดทุกวัน", "เขาชอบกินก๋วยเตี๋ยว")

    assert await found(client, "ข้าวผัด") == [rice]
    assert await found(client, "ก๋วยเตี๋ยว") == [noodles]


async def test_a_hindi_notes_repeated_words_are_its_concepts(client: Client) -> None:
    text = "बैकअप हर रात होता है। डेटाबेस का बैकअप जरूरी है। डेटाबेस बड़ा है।"

    observed = await call(client, "memory_observe", content=text)

    assert observed["concepts"] == ["बैकअप", "डेटाबेस"]  # whole words, not the pieces between vowel marks


async def test_a_hindi_note_is_found_by_its_words(client: Client) -> None:
    hindi, other = await save_all(client, "हिन्दी में डेटाबेस का बैकअप हर रात होता है", "सर्वर दिल्ली में है")

    assert await found(client, "डेटाबेस") == [hindi]  # cut at its marks, it was four single letters
    assert await found(client, "दिल्ली") == [other]


async def test_a_word_without_its_accents_finds_the_accented_record(client: Client) -> None:
    cafe, trip = await save_all(client, "Met Zoë at the Café to go over her résumé", "Booked the İstanbul trip")

    for query in ("cafe", "resume", "zoe", "Café", "RÉSUMÉ"):
        assert await found(client, query) == [cafe], query
    assert await found(client, "istanbul") == [trip]


# -- hyphenated words -------------------------------------------------------------------------------


def test_a_word_of_two_hyphenated_parts_is_also_indexed_joined() -> None:
    assert analyzer.terms("e-mail") == ["e-mail", "email", "mail"]
    assert "setup" in analyzer.terms("set-up")
    assert analyzer.terms("state-of-the-art") == ["state-of-the-art", "state", "art"]
    assert analyzer.terms("2023-05-08") == ["2023-05-08", "2023", "05", "08"]


async def test_email_and_e_mail_find_each_other(client: Client) -> None:
    hyphen, plain = await save_all(client, "Send the e-mail to the landlord", "The email bounced twice")

    assert set(await found(client, "email")) == {hyphen, plain}
    assert set(await found(client, "e-mail")) == {hyphen, plain}


# -- words wrapped in underscores --------------------------------------------------------------------


def test_a_word_wrapped_in_underscores_is_also_its_word() -> None:
    assert analyzer.terms("__init__") == ["__init__", "init"]
    assert analyzer.terms("__getattr__ hook") == ["__getattr__", "getattr", "hook"]
    assert analyzer.terms("MyClass.__repr__") == ["myclass.__repr__", "class", "repr"]
    assert analyzer.terms("___") == ["___"]  # nothing inside: the token alone, as before


async def test_a_dunder_method_is_found_by_its_word_and_whole(client: Client) -> None:
    dunder, other = await save_all(
        client, "Overrode __getattr__ to load settings lazily", "The getter for the theme returns a dict"
    )

    assert await found(client, "getattr") == [dunder]
    assert await found(client, "__getattr__") == [dunder]
    assert other not in await found(client, "getattr")


# -- invisible characters inside a word ------------------------------------------------------------


def test_soft_hyphens_zero_width_spaces_and_word_joiners_do_not_cut_a_word() -> None:
    assert analyzer.terms("post\u200bgres") == analyzer.terms("postgres") == ["postgr"]
    assert analyzer.terms("hyper\u00adparameter tuning") == ["hyperparamet", "tune"]
    assert analyzer.terms("data\u2060base \ufeffschema") == ["databas", "schema"]


async def test_a_word_pasted_with_a_soft_hyphen_is_found_by_the_word(client: Client) -> None:
    pasted, _ = await save_all(client, "Tuned the hyper\u00adparameter grid for the ranker", "Ranker grid notes")
    assert await found(client, "hyperparameter") == [pasted]


# -- older stores -----------------------------------------------------------------------------------


async def test_a_store_analysed_by_the_previous_analyzer_is_re_analysed(settings: Settings, clock: FakeClock) -> None:
    async with Client(build_server(settings, clock)) as client:
        (redis,) = await save_all(client, "使用Redis缓存用户数据")
    make_older(settings.db)  # the previous analyzer had no term `redi` for this record: it has none

    async with Client(build_server(settings, clock)) as client:
        diagnosis = await call(client, "memory_diagnose")
        hits = await found(client, "Redis")

    assert diagnosis["analyzer_version"] == ANALYZER_VERSION
    assert hits == [redis]
