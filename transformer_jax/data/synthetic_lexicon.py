"""The synthetic grammar's lexicon: the English and German words and what each may combine with.

Open classes (nouns, adjectives, verbs, adverbs, prepositions) are written as compact tables, one entry per lemma with
both languages' irregular forms, and read into :class:`Noun`, :class:`Adjective`, :class:`Verb`, :class:`Adverb` and
:class:`Preposition`; the closed classes (pronouns, possessives, conjunctions, modals, auxiliaries) are small tuples
and dicts. Tags restrict which nouns a verb or preposition takes ("the man reads the book", never "the book reads the
man"), so every sentence is plausible. Regular English (-s, -es, -ies) and German present tense forms are derived.
"""

from __future__ import annotations

import dataclasses

PERSONS = ("1s", "2s", "3s", "1p", "3p")
CASES = ("nom", "acc", "dat")

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

PRONOUNS = (("I", "ich", "1s"), ("you", "du", "2s"), ("he", "er", "3s"), ("she", "sie", "3s"),
            ("we", "wir", "1p"), ("they", "sie", "3p"))
POSSESSIVES = {"my": "mein", "your": "dein", "his": "sein", "her": "ihr", "our": "unser", "their": "ihr"}
SUBORDINATORS = (("because", "weil"), ("when", "wenn"), ("although", "obwohl"))
COORDINATORS = (("and", "und"), ("or", "oder"), ("but", "aber"))
MODALS = {  # tense name → (English, German finite forms by person)
    "can": ("can", dict(zip(PERSONS, ("kann", "kannst", "kann", "können", "können")))),
    "must": ("must", dict(zip(PERSONS, ("muss", "musst", "muss", "müssen", "müssen")))),
    "may": ("may", dict(zip(PERSONS, ("darf", "darfst", "darf", "dürfen", "dürfen")))),
    "want": ("want to", dict(zip(PERSONS, ("will", "willst", "will", "wollen", "wollen")))),
}
AUXILIARIES = {"h": dict(zip(PERSONS, ("habe", "hast", "hat", "haben", "haben"))),
               "s": dict(zip(PERSONS, ("bin", "bist", "ist", "sind", "sind")))}


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
BE = Verb({"base": "be", "3s": "is", "pp": "been"}, "sein", dict(AUXILIARIES["s"]), "gewesen", "s", "c", "paftlew", "-")
ADVERBS: dict[str, Adverb] = {en: Adverb(en, de, kind == "T", tenses) for en, de, kind, tenses in _entries(_ADVERBS)}
PREPOSITIONS: dict[str, Preposition] = {e[0]: Preposition(*e) for e in _entries(_PREPOSITIONS)}

NUM_LEMMAS = (len(NOUNS) + len(ADJECTIVES) + len(VERBS) + 1 + len(ADVERBS) + len(PREPOSITIONS) + len(PRONOUNS)
              + len(POSSESSIVES) + len(SUBORDINATORS) + 1 + len(COORDINATORS) + len(MODALS))


def lemma_count() -> int:
    """Number of distinct lemmas: nouns, verbs (with "be"), adjectives, adverbs and the closed-class words."""
    return NUM_LEMMAS


def german_finite_forms(person: str | None = None) -> frozenset[str]:
    """All German finite verb forms the grammar produces (for one person, or all)."""
    persons = PERSONS if person is None else (person,)
    tables = [v.de_present for v in VERBS.values()] + list(AUXILIARIES.values()) + [m for _, m in MODALS.values()]
    return frozenset(t[p] for t in tables for p in persons)
