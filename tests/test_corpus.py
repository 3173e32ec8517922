"""The conjugation corpus: forms checked against hand-written conjugations, the split, the schema."""

import json

import jsonschema
import pytest

from inferlab.model import corpus

# Hand-written from Spanish grammar (persons yo, tú, él, nosotros, vosotros, ellos).
KNOWN = {
    ("hablar", "presente"): "hablo hablas habla hablamos habláis hablan",
    ("hablar", "pretérito"): "hablé hablaste habló hablamos hablasteis hablaron",
    ("hablar", "futuro"): "hablaré hablarás hablará hablaremos hablaréis hablarán",
    ("comer", "presente"): "como comes come comemos coméis comen",
    ("comer", "pretérito"): "comí comiste comió comimos comisteis comieron",
    ("vivir", "presente"): "vivo vives vive vivimos vivís viven",
    ("vivir", "futuro"): "viviré vivirás vivirá viviremos viviréis vivirán",
    ("ser", "presente"): "soy eres es somos sois son",
    ("ser", "futuro"): "seré serás será seremos seréis serán",
    ("ir", "pretérito"): "fui fuiste fue fuimos fuisteis fueron",
    ("ir", "futuro"): "iré irás irá iremos iréis irán",
    ("estar", "presente"): "estoy estás está estamos estáis están",
    ("tener", "futuro"): "tendré tendrás tendrá tendremos tendréis tendrán",
    ("hacer", "pretérito"): "hice hiciste hizo hicimos hicisteis hicieron",
    ("decir", "presente"): "digo dices dice decimos decís dicen",
    ("saber", "presente"): "sé sabes sabe sabemos sabéis saben",
    ("dar", "pretérito"): "di diste dio dimos disteis dieron",
    ("oír", "presente"): "oigo oyes oye oímos oís oyen",
    ("dormir", "pretérito"): "dormí dormiste durmió dormimos dormisteis durmieron",
    ("pedir", "pretérito"): "pedí pediste pidió pedimos pedisteis pidieron",
    ("jugar", "pretérito"): "jugué jugaste jugó jugamos jugasteis jugaron",
    ("conducir", "presente"): "conduzco conduces conduce conducimos conducís conducen",
    ("leer", "pretérito"): "leí leíste leyó leímos leísteis leyeron",
    ("mantener", "presente"): "mantengo mantienes mantiene mantenemos mantenéis mantienen",
    ("proponer", "pretérito"): "propuse propusiste propuso propusimos propusisteis propusieron",
    ("prevenir", "futuro"): "prevendré prevendrás prevendrá prevendremos prevendréis prevendrán",
    ("distraer", "pretérito"): "distraje distrajiste distrajo distrajimos distrajisteis distrajeron",
    ("pensar", "presente"): "pienso piensas piensa pensamos pensáis piensan",
    ("pensar", "pretérito"): "pensé pensaste pensó pensamos pensasteis pensaron",
    ("volver", "presente"): "vuelvo vuelves vuelve volvemos volvéis vuelven",
    ("recordar", "presente"): "recuerdo recuerdas recuerda recordamos recordáis recuerdan",
    ("entender", "presente"): "entiendo entiendes entiende entendemos entendéis entienden",
}


@pytest.mark.parametrize("verb,tense", sorted(KNOWN))
def test_conjugate_matches_hand_written_forms(verb, tense):
    assert corpus.conjugate(verb, tense) == tuple(KNOWN[(verb, tense)].split())


def test_unknown_tense_is_refused():
    with pytest.raises(ValueError, match="tense"):
        corpus.conjugate("hablar", "imperfecto")


def test_enough_regular_verbs_and_no_duplicates():
    split = corpus.verb_split()
    regular = split["train"]["regular"] + split["heldout"]["regular"]
    assert len(regular) >= 150
    every = [v for s in split.values() for verbs in s.values() for v in verbs]
    assert len(every) == len(set(every))


def test_heldout_verbs_never_appear_in_training():
    train = corpus.examples("train")
    held = corpus.examples("heldout")
    held_verbs = {e.verb for e in held}
    assert held_verbs and {e.verb for e in train}.isdisjoint(held_verbs)
    text = "\n".join(e.prompt + e.completion for e in train)
    for verb in held_verbs:
        assert f" {verb}," not in text and f'"{verb}"' not in text
    assert {e.kind for e in held} == {"regular", "irregular"}


def test_split_is_a_fixed_rule():
    verbs = sorted(corpus.REGULAR_AR.split())
    assert corpus.verb_split()["heldout"]["regular"][0] == verbs[corpus.HOLDOUT_OFFSET]
    assert corpus.synthetic_verbs() == corpus.synthetic_verbs(corpus.N_SYNTHETIC, corpus.SYNTHETIC_SEED)


def test_synthetic_verbs_are_made_up_and_need_no_spelling_change():
    real = set(corpus.REGULAR_AR.split() + corpus.REGULAR_ER.split() + corpus.REGULAR_IR.split())
    for verb in corpus.synthetic_verbs():
        assert verb not in real and verb not in corpus.IRREGULAR
        assert verb[-2:] in ("ar", "er", "ir")
        assert verb[-3] not in "cgzñaeiou"


def test_example_text_is_the_canonical_compact_json():
    ex = corpus.Example("hablar", "pretérito", "él", "habló", "regular")
    assert ex.prompt == "conjuga hablar, pretérito, él:"
    assert ex.completion == '{"verbo":"hablar","tiempo":"pretérito","persona":"él","forma":"habló"}'
    assert list(json.loads(ex.completion)) == ["verbo", "tiempo", "persona", "forma"]


def test_schema_shape_and_every_example_validates():
    schema = corpus.conjugation_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["required"] == ["verbo", "tiempo", "persona", "forma"]
    assert schema["additionalProperties"] is False
    assert tuple(schema["properties"]["tiempo"]["enum"]) == corpus.TENSES
    assert tuple(schema["properties"]["persona"]["enum"]) == corpus.PERSONS
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for ex in corpus.examples("train") + corpus.examples("heldout"):
        validator.validate(json.loads(ex.completion))
    too_long = {"verbo": "x", "tiempo": "futuro", "persona": "yo", "forma": "x" * 21}
    assert not validator.is_valid(too_long)
