"""The built-in synthetic English→German corpus: the offline default data set.

Why it exists: the quick start and the tests must train and score a Transformer with no network and no download,
and the result must say something about the paper. So the corpus is generated here from a small synchronous
grammar in which every English sentence has exactly one German translation, built by the same derivation.
It is made so that *word order matters*:

* German is verb-second in main clauses ("Heute sieht der Mann den Hund.") and verb-final in subordinate clauses,
  and the perfect participle or modal infinitive goes to the end of its clause ("..., weil der Mann heute den
  kleinen Hund mit dem Ball gesehen hat."), so translating means moving words across 10+ tokens;
* who does what to whom is marked only by English word order but by German case (der/den/dem, strong and weak
  adjective endings), so a bag of English words cannot be translated: a model without positional encodings
  (§3.5) must do clearly worse than one with them;
* "that"-clauses nest (say/think/know that ... because ...) up to four clauses deep, and clauses are coordinated.

Constructions (each rendered in both languages by one function, so pairs are correct by construction):
main clauses with a pronoun (I/you/he/she/we/they → ich/du/er/sie/wir/sie) or noun phrase subject, present,
perfect (haben/sein auxiliary) or modal (can/must/may/want to → können/müssen/dürfen/wollen) verb groups;
intransitive, accusative, dative, ditransitive (dative before accusative), copula + adjective, and verbs of saying
with a "that" → "dass" complement; time adverbs that may be fronted (verb second stays), manner adverbs,
prepositional phrases with dative (mit, bei, von, zu, nach, aus, in + location) or accusative (für, ohne, durch,
gegen) objects and the standard contractions (zum, zur, beim, vom, im), optionally fronted; trailing or fronted
because/when/although → weil/wenn/obwohl clauses; and/or/but → und/oder/aber between main clauses (comma in both
languages); coordinated noun phrases (plural agreement); noun phrases with definite, indefinite, demonstrative
(this/these → dies-), possessive, quantifier (some/many → einige/viele), bare plural and number (2–99, spelled out,
"twenty-one" → "einundzwanzig") determiners, zero to two adjectives (optionally "very" → "sehr") with
strong/weak/mixed endings, weak masculine nouns (den Jungen) and dative plural -n (den Kindern).
English is deliberately kept unambiguous where German would differ: adverbs and PPs always follow their own
clause's material and precede its subordinate clauses, "you" is always singular "du", nouns with identical English
singular and plural (sheep) are left out, and clause coordination happens only at the top level.

Constituency trees (the parsing task, §6.3): the English half of every derivation is built as a
:class:`transformer_jax.parsing.trees.Tree`, the parsing task's tree, whose leaves are the English words (the
sentence is the leaves joined by spaces, exactly the English text above), so the one code path that renders an
English sentence also yields its Penn Treebank tree (`english_tree(clause)`). `generate_parse_splits` (one pair:
`generate_parse_pair`) returns (tokenised sentence, tree) pairs as in Vinyals et al. (2015):
"Today the man has seen the dog ." ↦
"(S (NP (NN Today)) (NP (DT the) (NN man)) (VP (VBZ has) (VP (VBN seen) (NP (DT the) (NN dog)))) (. .))" (the tree
as `to_bracketed` writes it). The tokens are the English sentence with "," and "." split off; the tree's leaves are
exactly these tokens.
Trees follow the PTB bracketing guidelines (Bies et al., 1995) with function tags and empty elements removed, as
parsers are trained and scored: auxiliaries and modals head nested VPs, (VP (MD can) (VP (VB see) ...)), and
"want to" takes an S without subject, (VP (VBZ wants) (S (VP (TO to) (VP (VB see) ...)))); objects, predicative
ADJP, PPs, adverbials and complement or adjunct clauses are children of the lowest VP; "that"/"because"/
"although" clauses are (SBAR (IN because) (S ...)) but "when" is a wh-adverb, (SBAR (WHADVP (WRB when)) (S ...));
fronted adverbials and subordinate clauses are children of the root S, as is the final (. .); coordination is flat,
(NP (NP ...) (CC and) (NP ...)) and (S (S ...) (, ,) (CC but) (S ...)); a PP in a noun phrase makes (NP (NP ...)
(PP ...)). Tags: "to" is always TO, "out of" nests (PP (IN out) (PP (IN of) NP)), "look for" and "wave to" are a
verb and a PP, "many" is JJ, numbers are CD, possessives PRP$, "very" heads (ADJP (RB very) (JJ small));
today/yesterday/tomorrow are temporal NPs (NN), other one-word adverbs (ADVP (RB often)), and "every day",
"last week", "on Monday" are NP or PP. The labels are PHRASE_LABELS and POS_TAGS.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import random
from collections.abc import Callable, Sequence
from typing import TypeVar

from transformer_jax.parsing.trees import Tree

PERSONS = ("1s", "2s", "3s", "1p", "3p")
CASES = ("nom", "acc", "dat")
MAX_WORDS = 60  # whitespace tokens per side; longer derivations are redrawn
MIN_WORDS = 3

# ---------------------------------------------------------------------------------------------------------- lexicon
# Nouns: English singular, plural ("-" = regular), German singular, plural, gender, tags [oblique singular].
# Tag 1 is the class: p person, a animal, f food, t thing, w text/song, l place, e event. Further tags select nouns
# for verbs and prepositions: r readable, s song, x openable, v vessel, m machine, b buildable, i "in" (location),
# u "through", o "out of". Oblique "=" marks a weak masculine noun (acc/dat singular = plural form: den Jungen).
_NOUNS = """
man men Mann Männer m p|woman women Frau Frauen f p|child children Kind Kinder n p|boy - Junge Jungen m p =
girl - Mädchen Mädchen n p|teacher - Lehrer Lehrer m p|doctor - Arzt Ärzte m p|student - Student Studenten m p =
friend - Freund Freunde m p|neighbour - Nachbar Nachbarn m p =|king - König Könige m p
queen - Königin Königinnen f p|farmer - Bauer Bauern m p =|baker - Bäcker Bäcker m p|cook - Koch Köche m p
driver - Fahrer Fahrer m p|singer - Sänger Sänger m p|artist - Künstler Künstler m p|mother - Mutter Mütter f p
father - Vater Väter m p|sister - Schwester Schwestern f p|brother - Bruder Brüder m p|son - Sohn Söhne m p
daughter - Tochter Töchter f p|grandmother - Großmutter Großmütter f p|grandfather - Großvater Großväter m p
soldier - Soldat Soldaten m p =|tourist - Tourist Touristen m p =|guest - Gast Gäste m p
pupil - Schüler Schüler m p|lady - Dame Damen f p|gentleman gentlemen Herr Herren m p Herrn
waiter - Kellner Kellner m p|customer - Kunde Kunden m p =|uncle - Onkel Onkel m p|aunt - Tante Tanten f p
baby - Baby Babys n p|nurse - Krankenschwester Krankenschwestern f p|policeman policemen Polizist Polizisten m p =
president - Präsident Präsidenten m p =
dog - Hund Hunde m a|cat - Katze Katzen f a|horse - Pferd Pferde n a|cow - Kuh Kühe f a|bird - Vogel Vögel m a
mouse mice Maus Mäuse f a|pig - Schwein Schweine n a|lion - Löwe Löwen m a =|monkey - Affe Affen m a =
bear - Bär Bären m a =|elephant - Elefant Elefanten m a =|hare - Hase Hasen m a =|duck - Ente Enten f a
goat - Ziege Ziegen f a|chicken - Huhn Hühner n a|snake - Schlange Schlangen f a|wolf wolves Wolf Wölfe m a
fox - Fuchs Füchse m a|frog - Frosch Frösche m a|owl - Eule Eulen f a|donkey - Esel Esel m a|tiger - Tiger Tiger m a
apple - Apfel Äpfel m f|cake - Kuchen Kuchen m f|egg - Ei Eier n f|banana - Banane Bananen f f
pear - Birne Birnen f f|soup - Suppe Suppen f f|sausage - Wurst Würste f f|tomato tomatoes Tomate Tomaten f f
carrot - Karotte Karotten f f|potato potatoes Kartoffel Kartoffeln f f|cookie - Keks Kekse m f
lemon - Zitrone Zitronen f f|orange - Orange Orangen f f|pizza - Pizza Pizzas f f|onion - Zwiebel Zwiebeln f f
cherry - Kirsche Kirschen f f
ball - Ball Bälle m t|book - Buch Bücher n trx|letter - Brief Briefe m trx|newspaper - Zeitung Zeitungen f tr
key - Schlüssel Schlüssel m t|hat - Hut Hüte m t|car - Auto Autos n tm|bicycle - Fahrrad Fahrräder n tm
table - Tisch Tische m tmb|chair - Stuhl Stühle m tmb|lamp - Lampe Lampen f tm|picture - Bild Bilder n t
clock - Uhr Uhren f tm|bag - Tasche Taschen f txv|box - Kiste Kisten f txvb|cup - Tasse Tassen f tv
glass - Glas Gläser n tv|plate - Teller Teller m t|knife knives Messer Messer n t|spoon - Löffel Löffel m t
window - Fenster Fenster n txm|door - Tür Türen f txm|bed - Bett Betten n tb|phone - Telefon Telefone n tm
computer - Computer Computer m tm|pen - Stift Stifte m t|shoe - Schuh Schuhe m t|coat - Mantel Mäntel m t
umbrella - Regenschirm Regenschirme m tx|toy - Spielzeug Spielzeuge n t|flower - Blume Blumen f t
stone - Stein Steine m t|map - Karte Karten f tr|ticket - Fahrkarte Fahrkarten f t|gift - Geschenk Geschenke n tx
boat - Boot Boote n tmb|bottle - Flasche Flaschen f txv|magazine - Zeitschrift Zeitschriften f tr
poem - Gedicht Gedichte n wr|story - Geschichte Geschichten f wr|song - Lied Lieder n ws
message - Nachricht Nachrichten f wr
house - Haus Häuser n liuob|park - Park Parks m liu|garden - Garten Gärten m liuo|forest - Wald Wälder m liuo
city - Stadt Städte f liu|village - Dorf Dörfer n liu|school - Schule Schulen f liob|station - Bahnhof Bahnhöfe m lo
church - Kirche Kirchen f liob|shop - Laden Läden m lio|kitchen - Küche Küchen f lio|museum - Museum Museen n liuo
hospital - Krankenhaus Krankenhäuser n lio|castle - Schloss Schlösser n liuob|bridge - Brücke Brücken f lb
river - Fluss Flüsse m li|lake - See Seen m li|market - Markt Märkte m lu|library - Bibliothek Bibliotheken f lio
restaurant - Restaurant Restaurants n lio|hotel - Hotel Hotels n lio|farm - Bauernhof Bauernhöfe m l
street - Straße Straßen f lu|beach - Strand Strände m l|mountain - Berg Berge m l|office - Büro Büros n lio
airport - Flughafen Flughäfen m l|zoo - Zoo Zoos m liu|cinema - Kino Kinos n lio|room - Zimmer Zimmer n lio
concert - Konzert Konzerte n e|game - Spiel Spiele n e|party - Party Partys f e|film - Film Filme m e
festival - Fest Feste n e|trip - Reise Reisen f e|wedding - Hochzeit Hochzeiten f e|meeting - Treffen Treffen n e
breakfast - Frühstück Frühstücke n e|lunch - Mittagessen Mittagessen n e|dinner - Abendessen Abendessen n e
exam - Prüfung Prüfungen f e|storm - Sturm Stürme m e|lesson - Unterrichtsstunde Unterrichtsstunden f e
holiday - Urlaub Urlaube m e
"""

# Adjectives: English, German, use (a animate, i inanimate, * any) [German stem when it changes: dunkel → dunkle].
_ADJECTIVES = """
small klein *|big groß *|old alt *|young jung a|new neu i|good gut *|bad schlecht *|beautiful schön *
ugly hässlich *|long lang i|short kurz i|happy glücklich a|sad traurig a|tired müde a|hungry hungrig a
friendly freundlich a|angry wütend a|quiet still *|calm ruhig a|loud laut *|fast schnell *|slow langsam *
clever klug a|stupid dumm a|rich reich a|poor arm a|strong stark a|weak schwach a|warm warm i|cold kalt i
hot heiß i|fresh frisch i|clean sauber *|dirty schmutzig *|dark dunkel i dunkl|bright hell i
expensive teuer i teur|cheap billig i|red rot *|blue blau i|green grün i|yellow gelb i|black schwarz *
white weiß *|brown braun *|grey grau *|heavy schwer *|light leicht i|empty leer i|full voll i|famous berühmt *
funny lustig *|strange seltsam *|brave mutig a|shy schüchtern a|lazy faul a|busy beschäftigt a|nice nett a
sweet süß *|sour sauer i saur|dry trocken i|wet nass *|soft weich i|hard hart i|round rund i|wide breit i
thick dick *|thin dünn *|pretty hübsch *|proud stolz a|polite höflich a|curious neugierig a|careful vorsichtig a
high hoch i hoh|wild wild a|sick krank a
"""

# Verbs: English base, 3sg ("-" regular), participle; German infinitive, ich/du/er forms ("-" regular), participle,
# auxiliary (h haben, s sein), frame (i intransitive, a accusative, d dative, g dative+accusative, s "that"-clause),
# subject classes, object tags (for g: of the accusative; the dative is a person or animal).
_VERBS = """
sleep - slept schlafen - schläfst schläft geschlafen h i pa -|work - worked arbeiten - - - gearbeitet h i p -
laugh - laughed lachen - - - gelacht h i p -|wait - waited warten - - - gewartet h i pa -
play - played spielen - - - gespielt h i pa -|dance - danced tanzen - - - getanzt h i p -
sing - sung singen - - - gesungen h i pa -|cry - cried weinen - - - geweint h i p -
talk - talked reden - - - geredet h i p -|live - lived leben - - - gelebt h i pa -
dream - dreamed träumen - - - geträumt h i pa -|rest - rested ruhen - - - geruht h i pa -
smile - smiled lächeln lächle lächelst lächelt gelächelt h i p -|shout - shouted schreien - - - geschrien h i p -
learn - learned lernen - - - gelernt h i p -|study - studied studieren - - - studiert h i p -
whistle - whistled pfeifen - - - gepfiffen h i p -|cough - coughed husten - - - gehustet h i pa -
pray - prayed beten - - - gebetet h i p -|celebrate - celebrated feiern - - - gefeiert h i p -
hesitate - hesitated zögern - - - gezögert h i pa -|win - won gewinnen - - - gewonnen h i p -
go goes gone gehen - - - gegangen s i pa -|come - come kommen - - - gekommen s i pa -
drive - driven fahren - fährst fährt gefahren s i p -|fly - flown fliegen - - - geflogen s i pa -
run - run laufen - läufst läuft gelaufen s i pa -|swim - swum schwimmen - - - geschwommen s i pa -
travel - travelled reisen - - - gereist s i p -|jump - jumped springen - - - gesprungen s i pa -
stay - stayed bleiben - - - geblieben s i pa -|fall - fallen fallen - fällst fällt gefallen s i pa -
climb - climbed klettern - - - geklettert s i pa -|hike - hiked wandern - - - gewandert s i p -
hurry - hurried eilen - - - geeilt s i pa -|ride - ridden reiten - - - geritten s i p -
sail - sailed segeln segle segelst segelt gesegelt s i p -
see - seen sehen - siehst sieht gesehen h a pa paftlew|buy - bought kaufen - - - gekauft h a p aft
sell - sold verkaufen - - - verkauft h a p aft|find - found finden - - - gefunden h a pa pat
need - needed brauchen - - - gebraucht h a pa pft|love - loved lieben - - - geliebt h a pa paf
visit - visited besuchen - - - besucht h a p pl|read - read lesen - liest liest gelesen h a p r
write - written schreiben - - - geschrieben h a p rs|eat - eaten essen - isst isst gegessen h a pa f
open - opened öffnen öffne öffnest öffnet geöffnet h a p x|close - closed schließen - - - geschlossen h a p x
carry - carried tragen - trägst trägt getragen h a pa paft|take - taken nehmen - nimmst nimmt genommen h a p tf
hear - heard hören - - - gehört h a pa pae|know - known kennen - - - gekannt h a p pal
forget - forgotten vergessen - vergisst vergisst vergessen h a p pte|paint - painted malen - - - gemalt h a p patl
wash - washed waschen - wäschst wäscht gewaschen h a p pat|catch - caught fangen - fängst fängt gefangen h a pa at
meet - met treffen - triffst trifft getroffen h a pa p|hold - held halten - hältst hält gehalten h a p aft
look_for looks_for looked_for suchen - - - gesucht h a pa patl
draw - drawn zeichnen zeichne zeichnest zeichnet gezeichnet h a p patl|build - built bauen - - - gebaut h a p b
clean - cleaned putzen - - - geputzt h a p t|repair - repaired reparieren - - - repariert h a p m
explain - explained erklären - - - erklärt h a p erw|order - ordered bestellen - - - bestellt h a p f
pay - paid bezahlen - - - bezahlt h a p p|count - counted zählen - - - gezählt h a p aft
feed - fed füttern - - - gefüttert h a p a|greet - greeted grüßen - - - gegrüßt h a pa p
ask - asked fragen - - - gefragt h a p p|understand - understood verstehen - - - verstanden h a pa pwe
watch - watched beobachten - - - beobachtet h a pa pae
photograph - photographed fotografieren - - - fotografiert h a p patl
like - liked mögen mag magst mag gemocht h a pa paftle|receive - received bekommen - - - bekommen h a p taf
hate - hated hassen - - - gehasst h a pa paf|kiss - kissed küssen - - - geküsst h a pa pa
hug - hugged umarmen - - - umarmt h a pa pa|touch - touched berühren - - - berührt h a pa pat
plan - planned planen - - - geplant h a p e|cook - cooked kochen - - - gekocht h a p f
call - called rufen - - - gerufen h a pa pa|wake - woken wecken - - - geweckt h a pa pa
choose - chosen wählen - - - gewählt h a p tfe|steal - stolen stehlen - stiehlst stiehlt gestohlen h a pa taf
lose - lost verlieren - - - verloren h a pa tr|hide - hidden verstecken - - - versteckt h a pa taf
throw - thrown werfen - wirfst wirft geworfen h a p t|fetch - fetched holen - - - geholt h a pa ptfa
use - used benutzen - - - benutzt h a p tm|save - saved retten - - - gerettet h a p pa
chase - chased jagen - - - gejagt h a pa pa|fill - filled füllen - - - gefüllt h a p v
help - helped helfen - hilfst hilft geholfen h d pa pa|thank - thanked danken - - - gedankt h d p pa
answer - answered antworten - - - geantwortet h d p p|trust - trusted vertrauen - - - vertraut h d pa pa
follow - followed folgen - - - gefolgt s d pa pa|congratulate - congratulated gratulieren - - - gratuliert h d p p
wave_to waves_to waved_to winken - - - gewinkt h d p pa
give - given geben - gibst gibt gegeben h g p tf|show - shown zeigen - - - gezeigt h g p tafr
send - sent schicken - - - geschickt h g p tf|bring - brought bringen - - - gebracht h g pa tf
lend - lent leihen - - - geliehen h g p t
say - said sagen - - - gesagt h s p -|think - thought denken - - - gedacht h s p -
know - known wissen weiß weißt weiß gewusst h s p -|believe - believed glauben - - - geglaubt h s p -
hope - hoped hoffen - - - gehofft h s p -|notice - noticed bemerken - - - bemerkt h s p -
fear - feared fürchten - - - gefürchtet h s p -
"""

# Adverbs: English, German, kind (T time/place: may be fronted and stands before the objects; M manner: after the
# objects, never fronted), tenses (* any, p perfect only, n not perfect).
_ADVERBS = """
today heute T *|now jetzt T n|yesterday gestern T p|tomorrow morgen T n|soon bald T n|later später T n
often oft T *|sometimes manchmal T *|again wieder T *|here hier T *|there dort T *|every_day jeden_Tag T *
in_the_morning am_Morgen T *|in_the_evening am_Abend T *|at_night in_der_Nacht T *|at_noon am_Mittag T *
last_week letzte_Woche T p|next_week nächste_Woche T n|this_morning heute_Morgen T *|on_Monday am_Montag T *
on_Tuesday am_Dienstag T *|on_Wednesday am_Mittwoch T *|on_Thursday am_Donnerstag T *|on_Friday am_Freitag T *
on_Saturday am_Samstag T *|on_Sunday am_Sonntag T *|at_the_weekend am_Wochenende T *
quickly schnell M *|slowly langsam M *|quietly leise M *|loudly laut M *|carefully vorsichtig M *
happily fröhlich M *|together zusammen M *|alone allein M *|well gut M *|early früh M *|late spät M *
"""

# Prepositions: English, German, case governed, noun tags allowed.
_PREPOSITIONS = """
with mit dat pat|near bei dat l|from von dat pl|to zu dat pl|after nach dat e|out_of aus dat o|in in dat i
for für acc pa|without ohne acc pat|through durch acc u|against gegen acc pat
"""

_PRONOUNS = (("I", "ich", "1s"), ("you", "du", "2s"), ("he", "er", "3s"), ("she", "sie", "3s"),
             ("we", "wir", "1p"), ("they", "sie", "3p"))
_POSSESSIVES = {"my": "mein", "your": "dein", "his": "sein", "her": "ihr", "our": "unser", "their": "ihr"}
_SUBORDINATORS = (("because", "weil"), ("when", "wenn"), ("although", "obwohl"))
_COORDINATORS = (("and", "und"), ("or", "oder"), ("but", "aber"))
_MODALS = {  # tense name → (English, German finite forms by person)
    "can": ("can", dict(zip(PERSONS, ("kann", "kannst", "kann", "können", "können")))),
    "must": ("must", dict(zip(PERSONS, ("muss", "musst", "muss", "müssen", "müssen")))),
    "may": ("may", dict(zip(PERSONS, ("darf", "darfst", "darf", "dürfen", "dürfen")))),
    "want": ("want to", dict(zip(PERSONS, ("will", "willst", "will", "wollen", "wollen")))),
}
_AUX = {"h": dict(zip(PERSONS, ("habe", "hast", "hat", "haben", "haben"))),
        "s": dict(zip(PERSONS, ("bin", "bist", "ist", "sind", "sind")))}
_CONTRACTIONS = {("zu", "dem"): "zum", ("zu", "der"): "zur", ("bei", "dem"): "beim", ("von", "dem"): "vom",
                 ("in", "dem"): "im"}

# German inflection tables: case → gender ("pl" for plural) → article or ending ("-" for none).
def _table(nom: str, acc: str, dat: str) -> dict[str, dict[str, str]]:
    return {case: dict(zip(("m", "f", "n", "pl"), row.replace("-", "").split(" "))) for case, row in
            zip(CASES, (nom, acc, dat))}


_DEF = _table("der die das die", "den die das die", "dem der dem den")
_EIN = _table("- e - e", "en e - e", "em er em en")  # ein and the possessives: mein, dein, unser, ...
_DIES = _table("er e es e", "en e es e", "em er em en")
_WEAK = _table("e e e en", "en e e en", "en en en en")  # after der, dieser; plural after meine
_MIXED = _table("er e es en", "en e es en", "en en en en")  # after ein, mein
_STRONG_PLURAL = {"nom": "e", "acc": "e", "dat": "en"}  # bare plurals, numbers, einige, viele

_EN_ONES = ("", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
            "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_EN_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_DE_ONES = ("", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn", "elf", "zwölf",
            "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn", "achtzehn", "neunzehn")
_DE_TENS = ("", "", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig")


@dataclasses.dataclass(frozen=True)
class Noun:
    en_sg: str
    en_pl: str
    de_sg: str
    de_pl: str
    gender: str  # m, f, n
    tags: str  # tags[0] is the class
    de_oblique: str  # accusative/dative singular (differs for weak masculine nouns)

    def de(self, case: str, plural: bool) -> str:
        """The German noun form in a case and number."""
        if plural:
            return self.de_pl + "n" if case == "dat" and self.de_pl[-1] not in "ns" else self.de_pl
        return self.de_sg if case == "nom" else self.de_oblique


@dataclasses.dataclass(frozen=True)
class Adjective:
    en: str
    de: str
    stem: str  # the form that takes endings
    use: str  # a animate, i inanimate, * any


@dataclasses.dataclass(frozen=True, eq=False)
class Verb:
    en: dict[str, str]  # "base", "3s", "pp"
    de_inf: str
    de_present: dict[str, str]  # person → finite form
    de_pp: str
    aux: str  # h haben, s sein
    frame: str  # i, a, d, g, s, c (copula)
    subject: str  # noun classes
    objects: str  # noun tags

    def en_present(self, person: str) -> str:
        """English present tense form for a person."""
        if self.frame == "c":
            return {"1s": "am", "3s": "is"}.get(person, "are")
        return self.en["3s"] if person == "3s" else self.en["base"]


@dataclasses.dataclass(frozen=True)
class Adverb:
    en: str
    de: str
    frontable: bool  # time/place adverbs (before the objects, may open a main clause); manner adverbs are not
    tenses: str  # * any, p perfect only, n not with the perfect


@dataclasses.dataclass(frozen=True)
class Preposition:
    en: str
    de: str
    case: str
    tags: str


def _entries(block: str) -> list[list[str]]:
    return [[f.replace("_", " ") for f in e.split()] for line in block.strip().splitlines() for e in line.split("|")]


def _en_suffix_s(word: str) -> str:
    head, sep, rest = word.partition(" ")
    if head.endswith(("s", "sh", "ch", "x", "z")):
        head += "es"
    elif head.endswith("y") and head[-2] not in "aeiou":
        head = head[:-1] + "ies"
    else:
        head += "s"
    return head + sep + rest


def _de_regular_present(inf: str) -> tuple[str, str, str]:
    stem = inf[:-2] if inf.endswith("en") else inf[:-1]
    e = "e" if stem[-1] in "td" else ""  # arbeiten → arbeitest, arbeitet
    return stem + "e", stem + e + ("t" if stem[-1] in "sßzx" else "st"), stem + e + "t"


def _load_nouns() -> list[Noun]:
    nouns = []
    for en_sg, en_pl, de_sg, de_pl, gender, tags, *oblique in _entries(_NOUNS):
        obl = de_sg if not oblique else de_pl if oblique[0] == "=" else oblique[0]
        nouns.append(Noun(en_sg, _en_suffix_s(en_sg) if en_pl == "-" else en_pl, de_sg, de_pl, gender, tags, obl))
    return nouns


def _load_verbs() -> list[Verb]:
    verbs = []
    for en_base, en_3s, en_pp, inf, *forms, pp, aux, frame, subj, objs in _entries(_VERBS):
        regular = _de_regular_present(inf)
        s1, s2, s3 = (r if f == "-" else f for f, r in zip(forms, regular))
        en = {"base": en_base, "3s": _en_suffix_s(en_base) if en_3s == "-" else en_3s, "pp": en_pp}
        verbs.append(Verb(en, inf, dict(zip(PERSONS, (s1, s2, s3, inf, inf))), pp, aux, frame, subj, objs))
    return verbs


NOUNS: list[Noun] = _load_nouns()
ADJECTIVES: list[Adjective] = [Adjective(en, de, rest[0] if rest else de.removesuffix("e"), use)  # müde → müden
                               for en, de, use, *rest in _entries(_ADJECTIVES)]
VERBS: dict[str, Verb] = {v.de_inf: v for v in _load_verbs()}  # keyed by German infinitive (unique)
BE = Verb({"base": "be", "3s": "is", "pp": "been"}, "sein", dict(_AUX["s"]), "gewesen", "s", "c", "paftlew", "-")
ADVERBS: dict[str, Adverb] = {en: Adverb(en, de, kind == "T", tenses) for en, de, kind, tenses in _entries(_ADVERBS)}
PREPOSITIONS: dict[str, Preposition] = {e[0]: Preposition(*e) for e in _entries(_PREPOSITIONS)}
_NOUN_BY_EN = {n.en_sg: n for n in NOUNS}
_ADJ_BY_EN = {a.en: a for a in ADJECTIVES}

NUM_LEMMAS = (len(NOUNS) + len(ADJECTIVES) + len(VERBS) + 1 + len(ADVERBS) + len(PREPOSITIONS) + len(_PRONOUNS)
              + len(_POSSESSIVES) + len(_SUBORDINATORS) + 1 + len(_COORDINATORS) + len(_MODALS))


def lemma_count() -> int:
    """Number of distinct lemmas: nouns, verbs (with "be"), adjectives, adverbs and the closed-class words."""
    return NUM_LEMMAS


def german_finite_forms(person: str | None = None) -> frozenset[str]:
    """All German finite verb forms the grammar produces (for one person, or all)."""
    persons = PERSONS if person is None else (person,)
    tables = [v.de_present for v in VERBS.values()] + list(_AUX.values()) + [m for _, m in _MODALS.values()]
    return frozenset(t[p] for t in tables for p in persons)


# ---------------------------------------------------------------------------------------------------------- trees
# The English side is built as transformer_jax.parsing.trees.Tree: a phrase's words are its leaves (`tree.leaves()`).
@functools.cache
def _word(tag: str, word: str) -> Tree:
    """A preterminal, (NN dog); shared, as trees are immutable."""
    return Tree(tag, (word,))


PHRASE_LABELS = frozenset({"S", "SBAR", "NP", "VP", "PP", "ADJP", "ADVP", "WHADVP"})
POS_TAGS = frozenset({"DT", "PRP", "PRP$", "CD", "JJ", "NN", "NNS", "NNP", "VBZ", "VBP", "VB", "VBN", "MD", "TO", "IN",
                      "WRB", "CC", "RB", ",", "."})
_COMMA = _word(",", ",")
_NOUN_ADVERBS = ("today", "yesterday", "tomorrow")  # PTB: (NP-TMP (NN today)), function tag dropped
_ADVERB_TAGS = {"the": "DT", "every": "DT", "this": "DT", "last": "JJ", "next": "JJ"}


def _en_pp(prep: str, obj: Tree) -> Tree:
    """(PP (IN in) NP); "to" is TO, "out of" nests: (PP (IN out) (PP (IN of) NP))."""
    *outer, head = prep.split()
    tree = Tree("PP", (_word("TO" if head == "to" else "IN", head), obj))
    for word in reversed(outer):
        tree = Tree("PP", (_word("IN", word), tree))
    return tree


@functools.cache
def _adverb_tree(en: str) -> Tree:
    """ADVP (RB often), NP (NN today | DT every NN day | JJ last NN week) or PP (IN on (NP (NNP Monday)))."""
    words = en.split()
    if words[0] in ("in", "at", "on"):
        return _en_pp(words[0], Tree("NP", tuple(_word(_ADVERB_TAGS.get(w, "NNP" if w[0].isupper() else "NN"), w)
                                                 for w in words[1:])))
    if len(words) == 1 and en not in _NOUN_ADVERBS:
        return Tree("ADVP", (_word("RB", en),))
    return Tree("NP", tuple(_word(_ADVERB_TAGS.get(w, "NN"), w) for w in words))


def _capitalised(t: Tree | str) -> Tree | str:
    if isinstance(t, Tree):
        return Tree(t.label, (_capitalised(t.children[0]), *t.children[1:]))
    return t[0].upper() + t[1:]


def _root(s: Tree) -> Tree:
    """The tree of a whole sentence: first word capitalised, final (. .) a child of the root S."""
    return _capitalised(Tree(s.label, (*s.children, _word(".", "."))))


# -------------------------------------------------------------------------------------------------- noun phrases
def english_number(n: int) -> str:
    """1–99 in English words: 21 → "twenty-one"."""
    if not 1 <= n <= 99:
        raise ValueError(f"number out of range 1..99: {n}")
    tens, unit = divmod(n, 10)
    return _EN_ONES[n] if n < 20 else _EN_TENS[tens] + (f"-{_EN_ONES[unit]}" if unit else "")


def german_number(n: int) -> str:
    """1–99 in German words, unit before ten: 21 → "einundzwanzig"."""
    if not 1 <= n <= 99:
        raise ValueError(f"number out of range 1..99: {n}")
    tens, unit = divmod(n, 10)
    if n < 20:
        return _DE_ONES[n]
    return _DE_TENS[tens] if not unit else ("ein" if unit == 1 else _DE_ONES[unit]) + "und" + _DE_TENS[tens]


def _np(noun: Noun, case: str, det: str, plural: bool, adjs: Sequence[Adjective], count: int, very: bool
        ) -> tuple[Tree, str]:
    g = "pl" if plural else noun.gender
    if det == "def":
        en_det, de_det, endings = "the", _DEF[case][g], _WEAK[case][g]
    elif det == "this":
        en_det, de_det, endings = ("these" if plural else "this"), "dies" + _DIES[case][g], _WEAK[case][g]
    elif det == "indef" and not plural:
        en_det, de_det, endings = "a", "ein" + _EIN[case][g], _MIXED[case][g]
    elif det in _POSSESSIVES:
        en_det, de_det, endings = det, _POSSESSIVES[det] + _EIN[case][g], _MIXED[case][g]
    elif plural and det in ("num", "some", "many", "bare"):
        endings = _STRONG_PLURAL[case]
        if det == "num":
            en_det, de_det = english_number(count), german_number(count)
        elif det == "bare":
            en_det, de_det = "", ""
        else:
            en_det, de_det = {"some": ("some", "einig"), "many": ("many", "viel")}[det]
            de_det += endings
    else:
        raise ValueError(f"determiner {det!r} with plural={plural}")
    en_words = [_word("JJ", a.en) for a in adjs] + [_word("NNS", noun.en_pl) if plural else _word("NN", noun.en_sg)]
    if very and adjs:  # "very" modifies the first adjective: (ADJP (RB very) (JJ small))
        en_words[0] = Tree("ADJP", (_word("RB", "very"), en_words[0]))
    if en_det == "a" and en_words[0].leaves()[0][0] in "aeiou":
        en_det = "an"
    de_words = (["sehr"] if very and adjs else []) + [a.stem + endings for a in adjs] + [noun.de(case, plural)]
    det_tag = {"num": "CD", "many": "JJ"}.get(det, "PRP$" if det in _POSSESSIVES else "DT")
    return Tree("NP", (*([_word(det_tag, en_det)] if en_det else []), *en_words)), " ".join(
        ([de_det] if de_det else []) + de_words)


def noun_phrase(noun: str, case: str, det: str = "def", *, plural: bool = False, adjectives: Sequence[str] = (),
                count: int = 0, very: bool = False) -> tuple[Tree, str]:
    """An (English tree, German) noun phrase; gender comes from the noun, case and number are explicit.

    Args:
      noun: English singular of a lexicon noun ("dog").
      case: "nom", "acc" or "dat".
      det: "def", "indef" (singular), "this", a possessive ("my", ..., "their"), or for plurals "num" (with
        `count`), "some", "many", "bare".
      plural: plural number (implied by the plural-only determiners).
      adjectives: English adjectives of the lexicon, in order.
      count: the number 2..99 for det="num".
      very: put "very"/"sehr" before the adjectives.

    Example: noun_phrase("dog", "dat", adjectives=["small"]) is ((NP (DT the) (JJ small) (NN dog)), "dem kleinen
    Hund"); the English words are the tree's leaves, "the small dog".
    """
    adjs = [_ADJ_BY_EN[a] for a in adjectives]
    return _np(_NOUN_BY_EN[noun], case, det, plural or det in ("num", "some", "many", "bare"), adjs, count, very)


def prepositional_phrase(prep: str, noun: str, det: str = "def", **kwargs) -> tuple[Tree, str]:
    """An (English tree, German) prepositional phrase; the case is the preposition's, "zu dem" contracts to "zum"."""
    p = PREPOSITIONS[prep]
    en, de = noun_phrase(noun, p.case, det, **kwargs)
    return _pp(p, en, de, det)


def _pp(p: Preposition, en: Tree, de: str, det: str) -> tuple[Tree, str]:
    art, _, rest = de.partition(" ")
    if det == "def" and (p.de, art) in _CONTRACTIONS:
        return _en_pp(p.en, en), f"{_CONTRACTIONS[p.de, art]} {rest}"
    return _en_pp(p.en, en), f"{p.de} {de}"


# --------------------------------------------------------------------------------------------------------- clauses
@dataclasses.dataclass
class Clause:
    """One clause, its parts already rendered as (English, German) pairs; word order is decided when rendering.

    tense: "pres", "perf", or a modal ("can", "must", "may", "want"). objs: (English, German) in order (dative before
    accusative). front (main clauses only): "adv" or "pp" (the first PP) opens the clause instead of the subject.
    comp: the "that"/"dass" complement of a verb of saying; adjuncts: (English, German, clause) trailing clauses.
    The English halves of subj, objs, pred and pps are `Tree`s (from noun_phrase, prepositional_phrase, or written
    by hand: (NP (PRP I))), so the clause has a PTB tree too; their leaves are the English words.
    """

    subj: tuple[Tree, str]
    person: str
    verb: Verb
    tense: str = "pres"
    objs: list[tuple[Tree, str]] = dataclasses.field(default_factory=list)
    pred: tuple[Tree, str] | None = None
    adv: Adverb | None = None
    pps: list[tuple[Tree, str]] = dataclasses.field(default_factory=list)
    front: str | None = None
    comp: Clause | None = None
    adjuncts: list[tuple[str, str, Clause]] = dataclasses.field(default_factory=list)


def _en_clause(c: Clause) -> Tree:
    """English S: [fronted] subject verb-group objects predicate PPs adverb [that ...] [because ...].

    Auxiliaries and modals head nested VPs; everything after the verb is a child of the lowest VP.
    """
    front, pps = [], c.pps
    if c.front == "adv":
        front.append(_adverb_tree(c.adv.en))
    elif c.front == "pp":
        front.append(pps[0][0])
        pps = pps[1:]
    v, p, t = c.verb, c.person, c.tense
    finite = "VBZ" if p == "3s" else "VBP"
    form, tag = (v.en_present(p), finite) if t == "pres" else (v.en["pp"], "VBN") if t == "perf" else (
        v.en["base"], "VB")
    head, _, particle = form.partition(" ")  # "look for", "wave to": the particle heads a PP over the object
    objs = [o[0] for o in c.objs]
    if particle:
        objs[0] = _en_pp(particle, objs[0])
    vp = Tree("VP", (_word(tag, head), *objs, *([c.pred[0]] if c.pred else []), *(pp[0] for pp in pps),
                     *([_adverb_tree(c.adv.en)] if c.adv and c.front != "adv" else []),
                     *([Tree("SBAR", (_word("IN", "that"), _en_clause(c.comp)))] if c.comp else []),
                     *(_sbar(en, sub) for en, _, sub in c.adjuncts)))
    if t == "perf":
        vp = Tree("VP", (_word(finite, "has" if p == "3s" else "have"), vp))
    elif t == "want":  # (VP (VBZ wants) (S (VP (TO to) (VP (VB see) ...)))), the empty subject dropped
        to_vp = Tree("S", (Tree("VP", (_word("TO", "to"), vp)),))
        vp = Tree("VP", (_word(finite, "wants" if p == "3s" else "want"), to_vp))
    elif t != "pres":
        vp = Tree("VP", (_word("MD", _MODALS[t][0]), vp))
    return Tree("S", (*front, c.subj[0], vp))


def _sbar(conj: str, sub: Clause) -> Tree:
    """(SBAR (IN because) (S ...)); "when" is a wh-adverb: (SBAR (WHADVP (WRB when)) (S ...))."""
    head = Tree("WHADVP", (_word("WRB", conj),)) if conj == "when" else _word("IN", conj)
    return Tree("SBAR", (head, _en_clause(sub)))


def _de_verbs(c: Clause) -> tuple[str, list[str]]:
    """(finite verb, clause-final non-finite verbs)."""
    if c.tense == "pres":
        return c.verb.de_present[c.person], []
    if c.tense == "perf":
        return _AUX[c.verb.aux][c.person], [c.verb.de_pp]
    return _MODALS[c.tense][1][c.person], [c.verb.de_inf]


def _de_middle(c: Clause, pps: Sequence[tuple[str, str]]) -> list[str]:
    """German middle field: time adverb, objects, manner adverb, predicate adjective, PPs."""
    out = [c.adv.de] if c.adv and c.adv.frontable and c.front != "adv" else []
    out += [o[1] for o in c.objs]
    if c.adv and not c.adv.frontable:
        out.append(c.adv.de)
    if c.pred:
        out.append(c.pred[1])
    return out + [pp[1] for pp in pps]


def _de_extraposed(c: Clause) -> list[str]:
    """Complement and adjunct clauses follow the verbs of their clause, each after a comma."""
    out = [",", "dass", *_de_sub(c.comp)] if c.comp else []
    for _, de, sub in c.adjuncts:
        out += [",", de, *_de_sub(sub)]
    return out


def _de_sub(c: Clause) -> list[str]:
    """Subordinate clause (after its conjunction): verb last, after the participle/infinitive."""
    fin, rest = _de_verbs(c)
    return [c.subj[1], *_de_middle(c, c.pps), *rest, fin, *_de_extraposed(c)]


def _de_main(c: Clause, vorfeld: list[str] | None = None) -> list[str]:
    """Main clause: one constituent, the finite verb second, the middle field, the non-finite verbs last."""
    fin, rest = _de_verbs(c)
    pps = c.pps
    if vorfeld is None and c.front == "adv":
        vorfeld = [c.adv.de]
    elif vorfeld is None and c.front == "pp":
        vorfeld, pps = [pps[0][1]], pps[1:]
    head = [c.subj[1], fin] if vorfeld is None else [*vorfeld, fin, c.subj[1]]
    return [*head, *_de_middle(c, pps), *rest, *_de_extraposed(c)]


def _sentence(tokens: Sequence[str]) -> str:
    s = " ".join(tokens).replace(" ,", ",") + "."
    return s[0].upper() + s[1:]


def _render(clause: Clause, fronted: tuple[str, str, Clause] | None = None) -> tuple[Tree, list[str]]:
    """(English S tree, German tokens) of a main clause, optionally opened by a (conj_en, conj_de, clause)."""
    if fronted is None:
        return _en_clause(clause), _de_main(clause)
    en_conj, de_conj, sub = fronted
    en = Tree("S", (_sbar(en_conj, sub), _COMMA, *_en_clause(clause).children))
    return en, _de_main(clause, [de_conj, *_de_sub(sub), ","])


def render(clause: Clause, fronted: tuple[str, str, Clause] | None = None) -> tuple[str, str]:
    """A main clause as an (English, German) sentence, optionally opened by a (conj_en, conj_de, clause)."""
    en, de = _render(clause, fronted)
    return _sentence(en.leaves()), _sentence(de)


def english_tree(clause: Clause, fronted: tuple[str, str, Clause] | None = None) -> Tree:
    """The PTB tree of `render(clause, fronted)[0]`; its words are that sentence tokenised ("... the park .")."""
    return _root(_render(clause, fronted)[0])


# ------------------------------------------------------------------------------------------------------ generation
def _pick(rng: random.Random, items: Sequence, cum: Sequence[float]):
    return items[bisect.bisect(cum, rng.random() * cum[-1])]


def _cum(weights: Sequence[float]) -> list[float]:
    out, total = [], 0.0
    for w in weights:
        total += w
        out.append(total)
    return out


@functools.cache
def _nouns_for(tags: str) -> tuple[Noun, ...]:
    return tuple(n for n in NOUNS if any(t in n.tags for t in tags))


@functools.cache
def _adjectives_for(cls: str) -> tuple[Adjective, ...]:
    use = "a" if cls in "pa" else "i"
    return tuple(a for a in ADJECTIVES if a.use in ("*", use))


@functools.cache
def _verbs_for(frame: str) -> tuple[Verb, ...]:
    return tuple(v for v in VERBS.values() if v.frame == frame)


@functools.cache
def _time_adverbs(tense: str) -> tuple[Adverb, ...]:
    ok = "*p" if tense == "perf" else "*n"
    return tuple(a for a in ADVERBS.values() if a.frontable and a.tenses in ok)


_MANNER = tuple(a for a in ADVERBS.values() if not a.frontable)
_PREP_LIST = tuple(PREPOSITIONS.values())
_SG_DETS, _SG_CUM = ("def", "indef", "this", *_POSSESSIVES), _cum([45, 30, 8] + [17 / 6] * 6)
_PL_DETS = ("def", "bare", "num", "some", "many", "this", *_POSSESSIVES)
_PL_CUM = _cum([30, 15, 20, 10, 8, 7] + [10 / 6] * 6)
_FRAMES = ("i", "a", "d", "g", "c", "s")
_FRAME_CUM = _cum([24, 36, 8, 6, 12, 14])
_FRAME_CUM_NO_SAY = _FRAME_CUM[:-1]
_TENSES, _TENSE_CUM = ("pres", "perf", "can", "must", "may", "want"), _cum([45, 30, 7, 6, 5, 7])
_MAX_DEPTH = 3  # clauses nest at most this deep below the main clause
_ADJUNCT_P = (0.25, 0.15, 0.08)


def _random_np(rng: random.Random, tags: str, case: str, coord: float = 0.0, attach: float = 0.0
               ) -> tuple[Tree, str, str, str]:
    """A random (English, German, person, noun class) noun phrase whose head noun has one of `tags`."""
    noun = rng.choice(_nouns_for(tags))
    plural = rng.random() < 0.3
    det = _pick(rng, _PL_DETS, _PL_CUM) if plural else _pick(rng, _SG_DETS, _SG_CUM)
    count = (rng.randint(2, 12) if rng.random() < 0.5 else rng.randint(13, 99)) if det == "num" else 0
    r, adjs = rng.random(), ()
    if r > 0.5:
        pool = _adjectives_for(noun.tags[0])
        adjs = (rng.choice(pool),) if r < 0.88 else tuple(rng.sample(pool, 2))
    en, de = _np(noun, case, det, plural, adjs, count, bool(adjs) and rng.random() < 0.15)
    if attach and rng.random() < attach:  # "the man with the hat": a PP inside the noun phrase
        pen, pde = _random_pp(rng, PREPOSITIONS[rng.choice(("with", "without"))])
        en, de = Tree("NP", (en, pen)), f"{de} {pde}"
    person = "3p" if plural else "3s"
    if coord and rng.random() < coord:
        en2, de2, _, _ = _random_np(rng, tags, case)
        en, de, person = Tree("NP", (en, _word("CC", "and"), en2)), f"{de} und {de2}", "3p"
    return en, de, person, noun.tags[0]


def _random_pp(rng: random.Random, prep: Preposition | None = None) -> tuple[Tree, str]:
    p = prep or rng.choice(_PREP_LIST)
    noun = rng.choice(_nouns_for(p.tags))
    plural = rng.random() < 0.25
    det = _pick(rng, _PL_DETS, _PL_CUM) if plural else _pick(rng, _SG_DETS, _SG_CUM)
    count = rng.randint(2, 99) if det == "num" else 0
    adjs = (rng.choice(_adjectives_for(noun.tags[0])),) if rng.random() < 0.35 else ()
    en, de = _np(noun, p.case, det, plural, adjs, count, False)
    return _pp(p, en, de, det)


def _random_clause(rng: random.Random, depth: int, front_ok: bool) -> Clause:
    frame = _pick(rng, _FRAMES, _FRAME_CUM if depth < _MAX_DEPTH else _FRAME_CUM_NO_SAY)
    verb = BE if frame == "c" else rng.choice(_verbs_for(frame))
    tense = _pick(rng, _TENSES, _TENSE_CUM)
    if rng.random() < 0.3:
        en, de, person = rng.choice(_PRONOUNS)
        en, cls = Tree("NP", (_word("PRP", en),)), "p"
    else:
        en, de, person, cls = _random_np(rng, verb.subject, "nom", 0.0 if frame == "c" else 0.08, 0.06)
    if cls not in "pa" and tense in ("may", "want"):  # things neither want nor are allowed: "the house can be old"
        tense = "can"
    c = Clause((en, de), person, verb, tense)
    if frame == "a":
        c.objs = [_random_np(rng, verb.objects, "acc", coord=0.08)[:2]]
    elif frame == "d":
        c.objs = [_random_np(rng, verb.objects, "dat")[:2]]
    elif frame == "g":
        c.objs = [_random_np(rng, "pa", "dat")[:2], _random_np(rng, verb.objects, "acc")[:2]]
    elif frame == "c":
        adj = rng.choice(_adjectives_for(cls))
        very = rng.random() < 0.15
        c.pred = (Tree("ADJP", (*([_word("RB", "very")] if very else []), _word("JJ", adj.en))),
                  ("sehr " if very else "") + adj.de)
    r = rng.random()
    if r < 0.28:
        c.adv = rng.choice(_time_adverbs(tense))
    elif r < 0.36 and frame != "c":
        c.adv = rng.choice(_MANNER)
    if frame != "c":
        r = rng.random()
        c.pps = [_random_pp(rng) for _ in range(0 if r < 0.62 else 1 if r < 0.92 else 2)]
    if front_ok:
        r = rng.random()
        if c.adv and c.adv.frontable and r < 0.35:
            c.front = "adv"
        elif c.pps and r > 0.8:
            c.front = "pp"
    if frame == "s":
        c.comp = _random_clause(rng, depth + 1, False)
    if depth < _MAX_DEPTH and rng.random() < _ADJUNCT_P[depth]:
        en_conj, de_conj = rng.choice(_SUBORDINATORS)
        c.adjuncts = [(en_conj, de_conj, _random_clause(rng, depth + 1, False))]
    return c


def _derive(rng: random.Random) -> tuple[Tree, list[str]]:
    """One derivation: (English S tree, German tokens), without the final full stop."""
    r = rng.random()
    if r < 0.15:  # two main clauses, coordinated
        en_conj, de_conj = rng.choice(_COORDINATORS)
        c1, c2 = _random_clause(rng, 1, True), _random_clause(rng, 1, True)
        return (Tree("S", (_en_clause(c1), _COMMA, _word("CC", en_conj), _en_clause(c2))),
                [*_de_main(c1), ",", de_conj, *_de_main(c2)])
    if r < 0.27:  # a fronted subordinate clause takes the first position: "Weil ..., sieht der Mann ..."
        en_conj, de_conj = rng.choice(_SUBORDINATORS)
        sub = _random_clause(rng, _MAX_DEPTH, False)
        return _render(_random_clause(rng, 1, False), (en_conj, de_conj, sub))
    return _render(_random_clause(rng, 0, True))


def _generate(rng: random.Random) -> tuple[str, str, Tree]:
    """(English, German, English S tree) of 3..60 whitespace tokens per sentence."""
    while True:
        tree, de_tokens = _derive(rng)
        en, de = _sentence(tree.leaves()), _sentence(de_tokens)
        n_en, n_de = en.count(" ") + 1, de.count(" ") + 1
        if MIN_WORDS <= min(n_en, n_de) and max(n_en, n_de) <= MAX_WORDS:
            return en, de, tree


def generate_pair(rng: random.Random) -> tuple[str, str]:
    """One (English, German) sentence pair drawn from the grammar with `rng` (3..60 whitespace tokens each)."""
    return _generate(rng)[:2]


def generate_parse_pair(rng: random.Random) -> tuple[str, Tree]:
    """One (tokenised English sentence, PTB tree) pair: the English side of `generate_pair(rng)` with its tree; the
    sentence is the tree's leaves joined by spaces."""
    tree = _root(_generate(rng)[2])
    return " ".join(tree.leaves()), tree


@dataclasses.dataclass(frozen=True)
class SyntheticConfig:
    """Arguments of `generate_splits` (the `config.data.synthetic` block)."""

    seed: int = 0
    train_size: int = 100_000
    dev_size: int = 1_000
    test_size: int = 1_000


_T = TypeVar("_T")  # the second half of a drawn pair: German sentence or English tree


def _draw(rng: random.Random, n: int, exclude: set[str], unique: bool,
          draw: Callable[[random.Random], tuple[str, _T]]) -> list[tuple[str, _T]]:
    out: list[tuple[str, _T]] = []
    while len(out) < n:
        pair = draw(rng)
        if pair[0] not in exclude:
            out.append(pair)
            if unique:
                exclude.add(pair[0])
    return out


def _splits(seed: int, sizes: dict[str, int], draw: Callable[[random.Random], tuple[str, _T]]
            ) -> dict[str, list[tuple[str, _T]]]:
    held_out: set[str] = set()
    out = {split: _draw(random.Random(f"synthetic/{seed}/{split}"), sizes[split], held_out, split != "train", draw)
           for split in ("test", "dev", "train")}
    return {split: out[split] for split in ("train", "dev", "test")}


def generate_splits(seed: int = 0, train_size: int = 100_000, dev_size: int = 1_000, test_size: int = 1_000
                    ) -> dict[str, list[tuple[str, str]]]:
    """Deterministic train/dev/test splits of (English, German) pairs.

    Test is drawn first, then dev (sentences unique within and across the two), then train, skipping every English
    sentence of dev or test (train may repeat its own short sentences, as natural corpora do). Each split has its
    own random stream, so changing one size does not change the other splits.
    """
    return _splits(seed, {"train": train_size, "dev": dev_size, "test": test_size}, generate_pair)


def generate_parse_splits(seed: int = 0, train_size: int = 40_000, dev_size: int = 1_000, test_size: int = 1_000
                          ) -> dict[str, list[tuple[str, Tree]]]:
    """Deterministic train/dev/test splits of (tokenised English sentence, PTB tree) pairs for parsing (§6.3).

    Same random streams and split discipline as `generate_splits`: with the same sizes, each split is the English
    side of `generate_splits`'s, in order, so no dev/test sentence of either task is in a train split of the other.
    A smaller size gives a prefix of the larger one's split. The default train size is about WSJ's (40K sentences).
    """
    return _splits(seed, {"train": train_size, "dev": dev_size, "test": test_size}, generate_parse_pair)
