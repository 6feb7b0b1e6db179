"""The phrase bank the preference generator draws from (written for this project).

Each *domain* is one preference attribute with the values a user can hold, the ways a
user mentions a value in ordinary chat, and the everyday requests (scenarios) in which
an assistant must act on it. Three kinds of domain, one per behavioural dimension:

- ``PET`` (preference evolution): the user states one value, later switches to another.
  A switch line never names the old value, so only a memory that keeps time (or
  replaces the old fact) shows the current one cleanly.
- ``CS`` (context sensitivity): one value holds at work, another in personal life;
  each is stated in a session of its own context.
- ``IQI`` (implicit-preference inference, this project's definition): the value is
  never said; the user only mentions things that imply it (a dog's name, an upset
  stomach after cheese). A test asks the assistant to act on the implied value.

``cues`` are the words that identify a value's evidence in a memory context (the value's
own words for stated preferences, the telling details for implicit ones). They drive the
judge-free exposure metrics, so the generator checks that every cue occurs only in the
turns that reveal its value (never in filler, openings of tests, or other domains).
Openings never contain a value's cue: the retriever has to connect "team dinner" to
"plant-based", not match a keyword.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ValueSpec:
    key: str
    value: str  # the IPAS value, as the ground truth states it
    cues: tuple[str, ...]  # words of the turns that reveal it
    state: tuple[str, ...] = ()  # saying it (PET first value, PET switch, CS)
    imply: tuple[str, ...] = ()  # implying it without naming it (IQI)
    good: str = ""  # what an answer that respects it does (rubrics of open tasks)
    # Words that name the value (in ``value``); for an implied value they never occur in
    # the chat, only in ground truth and in what a memory inferred from the chat.
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScenarioSpec:
    name: str
    openings: tuple[str, ...]
    options: dict[str, tuple[str, ...]]  # value key -> option texts that satisfy it
    neutral: tuple[str, ...]  # options that satisfy no value of the domain
    open_openings: tuple[str, ...] = ()  # the same request without options (open tasks)


@dataclass(frozen=True)
class DomainSpec:
    attribute: str
    dimension: str  # PET | CS | IQI
    values: dict[str, ValueSpec]
    scenarios: tuple[ScenarioSpec, ...]
    # PET: (first, second) value keys; CS: {context: value key}; IQI: the implied value
    first: str = ""
    second: str = ""
    by_context: dict[str, str] = field(default_factory=dict)
    # IQI: the option keys that violate the implied value (usual, tempting choices)
    violating: tuple[str, ...] = ()
    acks: tuple[str, ...] = ()  # assistant replies to a mention of this domain


def _v(key: str, value: str, cues: tuple[str, ...], *, state: tuple[str, ...] = (),
       imply: tuple[str, ...] = (), good: str = "", names: tuple[str, ...] = ()) -> ValueSpec:
    return ValueSpec(key, value, cues, state, imply, good, names)


DOMAINS: tuple[DomainSpec, ...] = (
    # -- PET ------------------------------------------------------------------------------
    DomainSpec(
        attribute="coffee_order",
        dimension="PET",
        first="espresso",
        second="decaf",
        values={
            "espresso": _v(
                "espresso", "a double espresso, strong, no milk", ("espresso",),
                state=(
                    "Double espresso every single day, no exceptions. It's the only thing "
                    "that gets my brain going.",
                    "I'm an espresso person through and through. Short, strong, no milk, "
                    "thank you very much.",
                    "Honestly the espresso machine is the best thing about the new office. "
                    "I'm on my second one already.",
                ),
                good="orders a strong espresso",
            ),
            "decaf": _v(
                "decaf", "decaf only (cut caffeine for sleep)", ("decaf",),
                state=(
                    "My doctor told me to cut the caffeine, so it's decaf for me from now "
                    "on. Annoying, but I'm already sleeping better.",
                    "Switched to decaf two weeks ago and I don't miss the jitters one bit.",
                    "No caffeine for me anymore. I only drink decaf these days, doctor's "
                    "orders.",
                ),
                good="orders something decaffeinated",
            ),
        },
        scenarios=(
            ScenarioSpec(
                "cafe_order",
                openings=(
                    "I'm heading into back-to-back calls. Can you put in an order at the "
                    "café downstairs for me?",
                    "The workshop starts in ten minutes and I'm flagging. Grab me something "
                    "from the cart on the corner?",
                ),
                options={
                    "espresso": ("A double espresso", "A ristretto-style double espresso"),
                    "decaf": ("A decaf cappuccino", "A decaf flat white"),
                },
                neutral=("A large green tea", "A hot chocolate with cream", "A fresh orange "
                         "juice"),
                open_openings=(
                    "I'm heading into back-to-back calls. Order me a drink from the café "
                    "downstairs, whatever you think I'd want.",
                ),
            ),
        ),
        acks=(
            "Got it, I'll remember that.",
            "Noted. That's useful for when I order things for you.",
        ),
    ),
    DomainSpec(
        attribute="exercise",
        dimension="PET",
        first="running",
        second="swimming",
        values={
            "running": _v(
                "running", "running (about three times a week)", ("running", "10k", "jog"),
                state=(
                    "Did my usual 10k along the river before work today. Best way to start "
                    "the day.",
                    "Running is basically my therapy. Three times a week, rain or shine.",
                    "Signed up for another half marathon in the autumn, so it's back to "
                    "running every other day.",
                ),
                good="suggests a run",
            ),
            "swimming": _v(
                "swimming", "swimming laps (knee injury rules out impact)",
                ("swimming", "pool", "laps"),
                state=(
                    "The physio says my knee can't take any more impact, so I've joined the "
                    "pool. Laps three times a week now.",
                    "Apparently I'm a swimmer now! Swimming is so much kinder to the knee "
                    "than the road ever was.",
                    "Knee's still dodgy, so it's swimming from here on. Did forty laps "
                    "yesterday and felt great.",
                ),
                good="suggests swimming",
            ),
        },
        scenarios=(
            ScenarioSpec(
                "hotel_workout",
                openings=(
                    "I've got a free hour tomorrow at 7 before the conference opens. What "
                    "should I do to stay active?",
                    "I'm stuck in this hotel until Sunday and going stir-crazy. Plan me a "
                    "workout for tomorrow?",
                ),
                options={
                    "running": ("Go for a run along the waterfront path",
                                "A 5-mile jog around the park next to the hotel"),
                    "swimming": ("Do laps in the hotel's indoor pool",
                                 "Book a lane at the public baths two streets away"),
                },
                neutral=("Join the hotel's spin class", "Take a long walk to the old town",
                         "Do a bodyweight circuit in your room"),
                open_openings=(
                    "I've got a free hour tomorrow before the conference. Plan something "
                    "active for me.",
                ),
            ),
        ),
        acks=("Good to know how you like to stay active.", "Sounds great, noted."),
    ),
    DomainSpec(
        attribute="flight_seat",
        dimension="PET",
        first="window",
        second="aisle",
        values={
            "window": _v(
                "window", "window seat", ("window",),
                state=(
                    "I always fight for the window seat. Watching the take-off never gets "
                    "old for me.",
                    "Window seat or I'm not getting on the plane, simple as that.",
                ),
                good="picks a window seat",
            ),
            "aisle": _v(
                "aisle", "aisle seat (needs to stand and stretch)", ("aisle",),
                state=(
                    "Since the back surgery I need to get up and stretch every hour, so it's "
                    "aisle seats only for me now.",
                    "I've turned into an aisle person. Being able to get up whenever I like "
                    "beats the view.",
                ),
                good="picks an aisle seat",
            ),
        },
        scenarios=(
            ScenarioSpec(
                "book_flight",
                openings=(
                    "Book me on the Thursday flight to Lisbon. Pick the seat, you know what "
                    "I like.",
                    "The conference moved to Oslo, so I need the 9:40 flight on Monday. "
                    "Choose a seat for me?",
                ),
                options={
                    "window": ("Seat 14A, by the window", "Seat 22F, next to the window"),
                    "aisle": ("Seat 14C, on the aisle", "Seat 22D, on the aisle"),
                },
                neutral=("Seat 14B, in the middle", "Let the airline assign one at check-in"),
                open_openings=(
                    "Book me on the Thursday flight to Lisbon and pick the seat you think "
                    "I'd want.",
                ),
            ),
        ),
        acks=("Noted for the next booking.", "Makes sense, I'll keep it in mind."),
    ),
    DomainSpec(
        attribute="transport",
        dimension="PET",
        first="car",
        second="train",
        values={
            "car": _v(
                "car", "drives everywhere by car", ("drove", "driving", "car"),
                state=(
                    "Drove up to my parents' place on Sunday. Three hours, but the car is "
                    "so comfortable I didn't mind.",
                    "I take the car pretty much everywhere. Public transport round here is "
                    "hopeless.",
                ),
                good="plans the trip by car",
            ),
            "train": _v(
                "train", "travels by train (sold the hatchback)", ("train", "rail"),
                state=(
                    "Sold my old hatchback last month! Got a rail card and honestly the "
                    "train is so much more relaxing.",
                    "I go everywhere by train now. I get so much reading done, I can't "
                    "believe I waited this long.",
                ),
                good="plans the trip by train",
            ),
        },
        scenarios=(
            ScenarioSpec(
                "weekend_trip",
                openings=(
                    "I need to get to Sam's wedding in Bristol on Saturday morning. Can you "
                    "sort out how I get there?",
                    "My sister's birthday lunch is in York next weekend. Work out how I get "
                    "up there, please.",
                ),
                options={
                    "car": ("Plan a route by road and reserve parking near the venue",
                            "Book a rental hatchback for the weekend"),
                    "train": ("Book a return ticket on the 8:10 intercity",
                              "Reserve seats on the first fast service north"),
                },
                neutral=("Book a seat on the overnight coach", "Book a short domestic flight"),
                open_openings=(
                    "I need to get to Sam's wedding in Bristol on Saturday morning. Sort out "
                    "the journey for me.",
                ),
            ),
        ),
        acks=("Good to know, thanks.", "Noted. I'll plan trips with that in mind."),
    ),
    DomainSpec(
        attribute="spice_level",
        dimension="PET",
        first="hot",
        second="mild",
        values={
            "hot": _v(
                "hot", "very spicy food", ("spicy", "chilli", "chillies"),
                state=(
                    "The spicier the better for me. I put chilli flakes on everything, even "
                    "breakfast.",
                    "Found a place that does a ridiculously spicy noodle soup. I was crying "
                    "and I loved it.",
                ),
                good="orders something very hot",
            ),
            "mild": _v(
                "mild", "mild food only (reflux)", ("mild", "reflux"),
                state=(
                    "Turns out my stomach trouble is reflux, so the doctor has me on mild "
                    "food only. Goodbye, fun.",
                    "It's gentle, mild stuff for me from now on. The reflux has been "
                    "brutal.",
                ),
                good="orders something mild",
            ),
        },
        scenarios=(
            ScenarioSpec(
                "takeaway",
                openings=(
                    "I'm starving and can't face cooking. Order me something from the Indian "
                    "place on Hill Street?",
                    "Friday night, no energy. Pick me a dish from the curry house menu.",
                ),
                options={
                    "hot": ("Lamb vindaloo, extra hot", "Phaal with extra green peppers"),
                    "mild": ("Chicken korma with plain rice", "A creamy dal makhani, gentle "
                             "on the heat"),
                },
                neutral=("Vegetable samosas and a salad", "Tandoori chicken with naan"),
                open_openings=(
                    "I'm starving and can't face cooking. Order me something from the Indian "
                    "place on Hill Street.",
                ),
            ),
        ),
        acks=("Noted!", "Ha, good to know. I'll remember that when food comes up."),
    ),
    # -- CS ---------------------------------------------------------------------------------
    DomainSpec(
        attribute="summary_style",
        dimension="CS",
        by_context={"work": "bullets", "personal": "story"},
        values={
            "bullets": _v(
                "bullets", "work: a few short bullet points", ("bullet", "bullets"),
                state=(
                    "For anything work-related I have zero patience for walls of text. Give "
                    "me three bullets and I'm happy.",
                    "Work stuff: keep it to a few bullet points please. I read everything on "
                    "my phone between meetings.",
                ),
                good="writes a few short bullet points",
            ),
            "story": _v(
                "story", "personal: the whole story, long and detailed",
                ("whole story", "rambling"),
                state=(
                    "When it's friends or family I actually love the long version, the "
                    "whole story with every little moment.",
                    "Outside of work give me a long, rambling message any day. The more "
                    "little moments the better.",
                ),
                good="tells the whole story in a warm, detailed message",
            ),
        },
        scenarios=(
            ScenarioSpec(
                "write_update",
                openings=(
                    "Can you write up how today's planning call went so I can send it on?",
                    "Write up an update about this week for me, please.",
                ),
                options={
                    "bullets": ("Three short points: decision, owner, next date",
                                "A tight list of four one-line points"),
                    "story": ("A warm, detailed message that walks through everything that "
                              "happened, moment by moment",
                              "A long, chatty letter with all the little details"),
                },
                neutral=("A single one-line text", "A formal memo with headings and an "
                         "appendix"),
                open_openings=("Write up how today went so I can send it on.",),
            ),
        ),
        acks=("Understood.", "Makes sense. I'll write things up that way."),
    ),
    DomainSpec(
        attribute="meeting_time",
        dimension="CS",
        by_context={"work": "early", "personal": "evening"},
        values={
            "early": _v(
                "early", "work: meetings first thing, before ten", ("first thing", "8:30"),
                state=(
                    "Work meetings have to be first thing. By eleven I'm deep in focus mode "
                    "and I hate being pulled out of it.",
                    "Put anything work-related first thing, ideally 8:30. I'm sharpest "
                    "before the office fills up.",
                ),
                good="schedules it first thing in the day",
            ),
            "evening": _v(
                "evening", "personal: social plans in the evenings", ("evenings",),
                state=(
                    "Catching up with friends? Evenings only. My weekend lie-ins are "
                    "sacred.",
                    "For anything social I'm an evenings person. I'm useless before noon on "
                    "my days off.",
                ),
                good="schedules it in the evening",
            ),
        },
        scenarios=(
            ScenarioSpec(
                "schedule",
                openings=(
                    "Can you find a slot for a catch-up with Priya next week?",
                    "Set up a time to meet Jonas next Tuesday, would you?",
                ),
                options={
                    "early": ("Tuesday at 8:30", "Wednesday, first slot of the day"),
                    "evening": ("Tuesday at 7:30 pm", "Wednesday after dinner, around 8 pm"),
                },
                neutral=("Tuesday at 1:00 pm", "Wednesday at 3:30 pm"),
                open_openings=("Find a time for a catch-up with Priya next week.",),
            ),
        ),
        acks=("Noted, I'll keep that in mind for scheduling.", "Got it."),
    ),
    DomainSpec(
        attribute="message_language",
        dimension="CS",
        by_context={"work": "english", "personal": "spanish"},
        values={
            "english": _v(
                "english", "work: messages in English", ("english",),
                state=(
                    "Everything at the office is in English, even with the Madrid team. "
                    "Company rule.",
                    "At work I write in English, always. Half the team wouldn't understand "
                    "anything else.",
                ),
                good="drafts the message in English",
            ),
            "spanish": _v(
                "spanish", "personal: messages to family in Spanish", ("spanish",),
                state=(
                    "With my family it's always Spanish. My grandmother would never forgive "
                    "me for texting in anything else.",
                    "Family group chat is strictly Spanish, it's the language we grew up "
                    "with.",
                ),
                good="drafts the message in Spanish",
            ),
        },
        scenarios=(
            ScenarioSpec(
                "draft_message",
                openings=(
                    "Draft a quick note saying I can't make it on Sunday after all.",
                    "Write a short message saying the plan moves to Friday.",
                ),
                options={
                    "english": ("Draft it in English", "Write it in English, keep it short"),
                    "spanish": ("Draft it in Spanish", "Write it in Spanish, keep it short"),
                },
                neutral=("Draft it in Portuguese", "Draft it in German"),
                open_openings=("Draft a quick note saying I can't make it on Sunday.",),
            ),
        ),
        acks=("Understood, thanks for telling me.", "Good to know."),
    ),
    # -- IQI --------------------------------------------------------------------------------
    DomainSpec(
        attribute="dessert",
        dimension="IQI",
        violating=("dairy",),
        values={
            "no_dairy": _v(
                "no_dairy", "avoids dairy (reacts badly to it)",
                ("cheese board", "ice cream", "milky latte", "stomach in knots"),
                imply=(
                    "Had the cheese board at the wedding and spent the whole night "
                    "regretting it. Same thing every single time.",
                    "Ice cream after dinner was a big mistake. Stomach in knots for hours, "
                    "again.",
                    "That milky latte at the airport wrecked my whole afternoon. I should "
                    "know better by now.",
                ),
                good="suggests a dessert without dairy",
                names=("dairy",),
            ),
        },
        scenarios=(
            ScenarioSpec(
                "dessert",
                openings=(
                    "I'm hosting four friends on Saturday. Pick a dessert I can make?",
                    "It's my turn to bring pudding to the book club. What should I make?",
                ),
                options={
                    "no_dairy": ("Mango sorbet with fresh berries",
                                 "Poached pears in spiced red wine"),
                    "dairy": ("Classic New York cheesecake", "Tiramisu",
                              "Crème brûlée with vanilla cream"),
                },
                neutral=(),
                open_openings=("I'm hosting four friends on Saturday. Suggest a dessert I "
                               "can make.",),
            ),
        ),
        acks=("Oh no, that sounds rough.", "Sorry to hear that."),
    ),
    DomainSpec(
        attribute="travels_with_dog",
        dimension="IQI",
        violating=("no_pets",),
        values={
            "pet_friendly": _v(
                "pet_friendly", "needs dog-friendly places (takes Biscuit along)",
                ("biscuit",),
                imply=(
                    "Biscuit chewed through another charging cable this morning. Worth it "
                    "for those eyes, though.",
                    "Took Biscuit round the park for an hour in the rain. We're both "
                    "soaked and he's thrilled.",
                    "Biscuit has the vet on Friday, just his jabs. He'll sulk all evening "
                    "afterwards.",
                ),
                good="picks a place where dogs are welcome",
                names=("dog-friendly",),
            ),
        },
        scenarios=(
            ScenarioSpec(
                "book_stay",
                openings=(
                    "Find me somewhere to stay in the Lake District for the long weekend. "
                    "I'm heading up Friday and taking everyone.",
                    "Book me two nights on the coast in Cornwall. The whole household is "
                    "coming.",
                ),
                options={
                    "pet_friendly": ("Fernbank Cottage: dogs welcome, enclosed garden",
                                     "The Old Mill B&B: well-behaved dogs stay free"),
                    "no_pets": ("The Grand Lakeside Hotel: spa, no animals allowed",
                                "Harbour View Suites: adults only, no pets"),
                },
                neutral=("A hostel dorm in town",),
                open_openings=("Find me somewhere to stay in the Lake District for the long "
                               "weekend. I'm taking everyone.",),
            ),
        ),
        acks=("Ha, sounds like a character.", "Aw. Hope it goes okay."),
    ),
    DomainSpec(
        attribute="sun_exposure",
        dimension="IQI",
        violating=("sunny",),
        values={
            "shade": _v(
                "shade", "avoids strong sun (sunburns very easily)",
                ("lobster", "factor 50", "shady table"),
                imply=(
                    "Twenty minutes in the garden yesterday and I'm red as a lobster. "
                    "Factor 50 does nothing for me.",
                    "Everyone wanted lunch outside and I spent the whole time hunting for "
                    "the one shady table, as usual.",
                ),
                good="plans something shaded or indoors",
                names=("strong sun", "sunburns"),
            ),
        },
        scenarios=(
            ScenarioSpec(
                "holiday_day",
                openings=(
                    "We've got a free day in Crete next month. What should we do?",
                    "One spare day in Mallorca on the trip. Plan it for me?",
                ),
                options={
                    "shade": ("A morning walk through the shaded gorge, then the old town's "
                              "museum", "A cooking class in a cool stone farmhouse"),
                    "sunny": ("A full day on a sun lounger at the beach",
                              "A boat trip with deck sunbathing all afternoon"),
                },
                neutral=("Stay in and catch up on sleep",),
                open_openings=("We've got a free day in Crete next month. Plan it for me.",),
            ),
        ),
        acks=("Ouch!", "That sounds uncomfortable."),
    ),
    DomainSpec(
        attribute="bedtime",
        dimension="IQI",
        violating=("late",),
        values={
            "early": _v(
                "early", "early nights (in bed by ten)",
                ("half nine", "5:30", "asleep on the sofa"),
                imply=(
                    "Fell asleep on the sofa at half nine again. My friends have officially "
                    "given up on me.",
                    "Up at 5:30 like always. The house is so quiet then, it's my favourite "
                    "part of the day.",
                ),
                good="picks an early show",
                names=("early nights",),
            ),
        },
        scenarios=(
            ScenarioSpec(
                "concert_tickets",
                openings=(
                    "Get me tickets for the jazz festival on Friday?",
                    "There's a comedy night at the Palace on Saturday. Sort out tickets?",
                ),
                options={
                    "early": ("The 6:00 pm early set", "The matinee at 5 pm"),
                    "late": ("The 11:30 pm late show", "The midnight special"),
                },
                neutral=(),
                open_openings=("Get me tickets for the jazz festival on Friday.",),
            ),
        ),
        acks=("Ha, fair enough.", "Sounds peaceful."),
    ),
)

PERSONAS: tuple[tuple[str, str], ...] = (
    ("Maya Lindqvist", "a product designer in Leeds who likes cooking for friends"),
    ("Tomás Okafor", "a civil engineer who travels for work a lot"),
    ("Priya Raman", "a secondary-school teacher who runs a book club"),
    ("Jonah Weiss", "a data analyst who just moved cities"),
    ("Aiko Brennan", "a nurse working rotating shifts"),
    ("Lucas Ferreira", "a freelance photographer with a small studio"),
    ("Hannah Osei", "a project manager at a logistics firm"),
    ("Ruairí Doyle", "a sound engineer who plays in a folk band"),
)

# Everyday chat the preferences are buried in. None of it may contain a cue (checked).
FILLER: tuple[tuple[str, str], ...] = (
    ("Finally finished that report. Two weeks of my life I'm not getting back.",
     "Congratulations on getting it done! That's a weight off."),
    ("My neighbour is renovating again. The drilling starts at exactly seven.",
     "That sounds exhausting. Hopefully it wraps up soon."),
    ("Watched that documentary about octopuses last night. Absolutely wild creatures.",
     "They really are. The camouflage alone is incredible."),
    ("The quarterly review went better than I feared.",
     "Glad to hear it! Anything in particular that went well?"),
    ("I keep meaning to learn to play the ukulele. Maybe this year.",
     "It's a great first instrument. A few minutes a day goes a long way."),
    ("My niece turned six and wants to be an astronaut and a baker. Both at once.",
     "Honestly, that sounds like an excellent plan."),
    ("The new project lead seems nice, if a bit intense.",
     "First impressions can soften. Give it a couple of weeks."),
    ("Can't believe it's already the end of the month.",
     "Time really does fly. Anything big coming up?"),
    ("My plants are thriving for once. The basil has gone feral.",
     "A feral basil plant sounds like a great problem to have."),
    ("Lost an hour today trying to fix the printer. It won.",
     "Printers always win. Did it at least print eventually?"),
    ("Reading a thriller with a twist I really didn't see coming.",
     "The best kind of book. Who's the author?"),
    ("We had a power cut at the office and everyone just went home.",
     "A surprise afternoon off, not bad."),
    ("My brother is getting married next spring, so planning chaos has begun.",
     "Exciting! Let me know if you want help keeping track of things."),
    ("I tried making sourdough. It came out like a brick.",
     "Sourdough takes a few tries. The next one will be better."),
    ("Our team won the office quiz. I carried the geography round.",
     "Well done! Geography rounds are the hardest."),
    ("The landlord finally fixed the boiler.",
     "Hot water at last. That's worth celebrating."),
    ("Spent the afternoon sorting old photos. So many embarrassing haircuts.",
     "Those make the best memories, though."),
    ("Started a new podcast about ancient history, it's surprisingly gripping.",
     "History podcasts can be addictive. Enjoy it!"),
    ("I have a dentist appointment tomorrow and I'm dreading it.",
     "Fingers crossed it's quick and painless."),
    ("The budget meeting got moved three times this week.",
     "That's frustrating. Hopefully it sticks this time."),
    ("My friend lent me a board game with a forty-page rulebook.",
     "Ambitious! Those can be great once you get going."),
    ("I repainted the hallway a very bold green.",
     "Bold choices make a home feel like yours."),
    ("Our intern built a dashboard that actually works. I'm impressed.",
     "That's great to hear. Make sure they get the credit."),
    ("My phone screen cracked, of course a week after the warranty ran out.",
     "That's always the way. Is it still usable?"),
    ("Our building got new recycling bins and nobody understands the colours.",
     "Colour-coded bins are a puzzle everywhere. There's usually a sticker inside the lid."),
    ("I finally booked the boiler service. Adulting.",
     "Good call, it's the kind of thing that's easy to put off."),
    ("My manager wants everyone to try a new planning tool. Again.",
     "Tool fatigue is real. Is this one any better than the last?"),
    ("Went to a pub quiz and we came second to a team called The Quizzly Bears.",
     "Second place with a respectable name beats first with a pun."),
    ("The cat next door has started visiting our balcony every afternoon.",
     "An afternoon visitor with no obligations, lovely."),
    ("My friend is learning to juggle and sends me videos of every dropped ball.",
     "Dedication! Juggling takes a lot of dropped balls."),
    ("I've been sorting out my tax return all afternoon.",
     "Not the most fun afternoon. Is it nearly done?"),
    ("Our team offsite is in a converted barn this year.",
     "That sounds like a nice change from the usual meeting rooms."),
    ("I bought a secondhand bookshelf and it took three hours to get it up the stairs.",
     "The stairs always win the first round. Glad it made it."),
    ("My nephew beat me at chess and has not stopped talking about it.",
     "He's earned the bragging rights, to be fair."),
    ("The supermarket moved everything around and I got lost for twenty minutes.",
     "Store layouts change just when you've learned them."),
    ("I started keeping a journal. Three days in, so far so good.",
     "Three days is a good start. Small habits add up."),
    ("Our washing machine sounds like a helicopter on the spin cycle.",
     "That sounds worth a look before it takes off."),
    ("Had a long video call with my cousin in Canada.",
     "It's great to keep in touch across time zones."),
    ("I'm trying to drink more water. Mostly I forget.",
     "A bottle on the desk can help as a reminder."),
    ("The office plants are all plastic and I've only just noticed.",
     "Low maintenance, at least!"),
    ("We're repainting the spare room and can't agree on a shade of grey.",
     "Grey has a surprising number of opinions attached to it."),
    ("My headphones died in the middle of a meeting.",
     "Terrible timing. Did anyone notice?"),
    ("I signed up to volunteer at the food bank once a month.",
     "That's a lovely thing to do."),
    ("Someone left a whole cake in the office kitchen with a note saying 'help yourself'.",
     "The best kind of office mystery."),
    ("I rearranged my desk and now I can't find anything.",
     "A new layout takes a week before it stops hiding things."),
    ("My library book is overdue and I haven't started it.",
     "Renewals exist for exactly this."),
)

GREETINGS: tuple[str, ...] = (
    "Hey, quick one before I forget.",
    "Hi! Long day.",
    "Morning-ish. Okay, a few things.",
    "Hello again.",
    "Right, I'm back.",
)
GREETING_REPLIES: tuple[str, ...] = (
    "Hi! What's on your mind?",
    "Hello! Happy to help.",
    "Welcome back. What can I do for you?",
)
