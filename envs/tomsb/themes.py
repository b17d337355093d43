"""Word banks and name pools for generating TOM-SB universes (our own lists, no published data).

A `Theme` names its three levels (coarse to fine, e.g. ("company", "division", "team")) and holds
one `Pool` per level. A pool draws `count` distinct names for one parent node; it never returns a
name whose normalised form (see `universe.normalise_name`) is already used in the universe being
built, so every generated universe has 39 globally unique names by construction (and
`Universe.from_dict` validates it again).

Pools come in four kinds, chosen per theme so that names read naturally:
- `Words`: a flat bank of names (e.g. hospital departments), drawn without replacement;
- `Combine`: a template over word parts (e.g. "{Northwind} {Health}"), with a distinct first part
  per universe so that siblings do not look alike;
- `Children`: a bank keyed by the parent's name (e.g. division "Security" -> its possible teams),
  so that a child always belongs to its parent semantically;
- `Derived`: a name computed from the parent (e.g. street "Maple Avenue" -> "14 Maple Avenue").

Contract: pools are pure functions of (rng, count, parent, taken); all randomness comes from the
`numpy.random.Generator` passed in, so generation is reproducible from a seed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from tomgym.envs.tomsb.universe import normalise_name


class ThemeError(ValueError):
    """A word bank cannot supply enough distinct names (a bug in a theme definition)."""


class Pool:
    """Draws `count` distinct names for one parent; `taken` holds normalised names in use."""

    def draw(
        self, rng: np.random.Generator, count: int, parent: str | None, taken: set[str]
    ) -> list[str]:
        raise NotImplementedError

    def bank(self) -> list[str]:
        """Every name (or name part) this pool can produce, for uniqueness checks in tests."""
        raise NotImplementedError


def _pick(rng: np.random.Generator, candidates: Sequence[str], count: int, what: str) -> list[str]:
    if len(candidates) < count:
        raise ThemeError(f"{what}: needs {count} names but only {len(candidates)} are free")
    order = rng.permutation(len(candidates))[:count]
    return [candidates[int(i)] for i in order]


@dataclass(frozen=True)
class Words(Pool):
    names: tuple[str, ...]

    def draw(
        self, rng: np.random.Generator, count: int, parent: str | None, taken: set[str]
    ) -> list[str]:
        free = [n for n in self.names if normalise_name(n) not in taken]
        return _pick(rng, free, count, f"word bank starting {self.names[:2]}")

    def bank(self) -> list[str]:
        return list(self.names)


@dataclass(frozen=True)
class Combine(Pool):
    """`template.format(first, second)`; by default each first part once per universe."""

    template: str
    first: tuple[str, ...]
    second: tuple[str, ...]
    distinct_first: bool = True

    def draw(
        self, rng: np.random.Generator, count: int, parent: str | None, taken: set[str]
    ) -> list[str]:
        if not self.distinct_first:
            combos = [self.template.format(f, s) for f in self.first for s in self.second]
            free = [n for n in combos if normalise_name(n) not in taken]
            return _pick(rng, free, count, f"template {self.template!r}")
        # A first part whose words are already used anywhere in the universe (e.g. "Juniper" in
        # "Juniper Realty") is skipped, so that names never read as variants of one another.
        used_words = {w for key in taken for w in key.split()}
        firsts = [f for f in self.first if not set(normalise_name(f).split()) & used_words]
        out: list[str] = []
        for first in _pick(rng, firsts, len(firsts), f"template {self.template!r}"):
            name = self.template.format(first, self.second[int(rng.integers(len(self.second)))])
            if normalise_name(name) not in taken:
                out.append(name)
            if len(out) == count:
                return out
        raise ThemeError(f"template {self.template!r}: cannot draw {count} distinct names")

    def bank(self) -> list[str]:
        return [self.template.format(f, s) for f in self.first for s in self.second]


@dataclass(frozen=True)
class Children(Pool):
    """Children chosen from a bank keyed by the parent's name (the parent level is its keys)."""

    groups: Mapping[str, tuple[str, ...]]

    def draw(
        self, rng: np.random.Generator, count: int, parent: str | None, taken: set[str]
    ) -> list[str]:
        if parent not in self.groups:
            raise ThemeError(f"no child bank for parent {parent!r}")
        free = [n for n in self.groups[parent] if normalise_name(n) not in taken]
        return _pick(rng, free, count, f"children of {parent!r}")

    def parents(self) -> Words:
        return Words(tuple(self.groups))

    def bank(self) -> list[str]:
        return [n for kids in self.groups.values() for n in kids]


@dataclass(frozen=True)
class Derived(Pool):
    """`make(rng, parent)` proposes one name; proposals already taken are redrawn."""

    make: Callable[[np.random.Generator, str], str]
    attempts: int = 200

    def draw(
        self, rng: np.random.Generator, count: int, parent: str | None, taken: set[str]
    ) -> list[str]:
        out: list[str] = []
        seen = set(taken)
        for _ in range(self.attempts):
            name = self.make(rng, parent or "")
            key = normalise_name(name)
            if key and key not in seen:
                out.append(name)
                seen.add(key)
                if len(out) == count:
                    return out
        raise ThemeError(f"derived pool under {parent!r}: cannot draw {count} distinct names")

    def bank(self) -> list[str]:
        return []


@dataclass(frozen=True)
class Theme:
    """One family of universes: level names, the kind of secret, and a pool per level."""

    name: str
    levels: tuple[str, str, str]
    fact_type: str
    description: str
    pools: tuple[Pool, Pool, Pool]


# ---------------------------------------------------------------------------------------------
# Shared parts
# ---------------------------------------------------------------------------------------------

BRAND_PREFIXES = (
    "Northwind", "Bluefin", "Crescent", "Ironwood", "Lumen", "Silverline", "Tidewater",
    "Vantage", "Keystone", "Summit", "Cobalt", "Redwood", "Granite", "Harborview", "Evergreen",
    "Brightwater", "Stonebridge", "Clearpoint", "Highland", "Pinecrest", "Oakridge", "Starling",
    "Westbrook", "Aurora", "Beacon", "Cedarline", "Falconer", "Juniper", "Larkspur", "Halcyon",
    "Orion", "Quarry", "Sterling", "Trillium", "Windward",
)  # fmt: skip

CITIES = (
    "Ashford", "Bramley", "Carrow", "Dunmore", "Elmsworth", "Fairhaven", "Glenrock", "Hollis",
    "Kingsbury", "Larchmont", "Millbrook", "Newhaven", "Oakfield", "Pemberton", "Queensbury",
    "Redcliff", "Southport", "Thornbury", "Upton", "Valemont", "Westfield", "Yarrow", "Brookdale",
    "Castleton", "Dovercourt", "Easton", "Foxborough", "Greystone", "Hartwell", "Ironbridge",
    "Lakemont", "Marlow",
)  # fmt: skip

ORDINALS = (
    "1st", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th", "9th", "10th", "11th", "12th",
    "14th", "16th", "18th", "21st", "23rd", "25th", "27th", "31st", "34th", "42nd", "52nd",
    "82nd",
)  # fmt: skip


def _ordinal_unit(kinds: Sequence[str], unit: str) -> Callable[[np.random.Generator, str], str]:
    def make(rng: np.random.Generator, parent: str) -> str:
        ordinal = ORDINALS[int(rng.integers(len(ORDINALS)))]
        return f"{ordinal} {kinds[int(rng.integers(len(kinds)))]} {unit}"

    return make


# ---------------------------------------------------------------------------------------------
# Themes
# ---------------------------------------------------------------------------------------------

_CORPORATE_TEAMS = Children(
    {
        "Cloud Services": ("Infrastructure", "Platform Reliability", "Object Storage", "Networking", "Developer Tools"),
        "AI Research": ("Language Models", "Computer Vision", "Reinforcement Learning", "Speech Recognition", "Recommender Systems"),
        "Finance": ("Accounts Payable", "Treasury", "Financial Planning", "Tax", "Payroll"),
        "Marketing": ("Brand Strategy", "Growth Analytics", "Content Studio", "Events", "Public Relations"),
        "Sales": ("Enterprise Accounts", "Inside Sales", "Channel Partnerships", "Sales Operations", "Customer Success"),
        "Security": ("Threat Intelligence", "Penetration Testing", "Identity Management", "Incident Response", "Security Compliance"),
        "Human Resources": ("Recruiting", "Learning and Development", "Benefits", "Employee Relations", "Compensation"),
        "Legal": ("Contracts", "Intellectual Property", "Litigation", "Regulatory Affairs", "Privacy Office"),
        "Hardware": ("Chip Design", "Firmware", "Thermal Engineering", "Board Layout", "Hardware Validation"),
        "Mobile": ("iOS App", "Android App", "Mobile Payments", "Push Messaging", "App Performance"),
        "Data": ("Data Engineering", "Business Intelligence", "Data Governance", "Experimentation", "Analytics Platform"),
        "Operations": ("Facilities", "Procurement", "Logistics", "Vendor Management", "IT Helpdesk"),
    }
)  # fmt: skip

_HOSPITAL_DEPARTMENTS = (
    "Cardiology", "Oncology", "Neurology", "Pediatrics", "Orthopedics", "Dermatology",
    "Radiology", "Emergency Medicine", "Gastroenterology", "Endocrinology", "Nephrology",
    "Pulmonology", "Rheumatology", "Urology", "Obstetrics", "Gynecology", "Psychiatry",
    "Ophthalmology", "Otolaryngology", "Anesthesiology", "Pathology", "Hematology",
    "Infectious Diseases", "Geriatrics", "Neonatal Intensive Care", "Physical Therapy",
    "Plastic Surgery", "Vascular Surgery", "Cardiac Surgery", "Neurosurgery", "Sleep Medicine",
    "Allergy and Immunology", "Palliative Care", "Sports Medicine", "Nuclear Medicine",
    "Trauma Surgery", "Pain Management", "Clinical Genetics", "Transplant Services", "Audiology",
)  # fmt: skip

_COLLEGE_DEPARTMENTS = Children(
    {
        "College of Engineering": ("Civil Engineering", "Mechanical Engineering", "Electrical Engineering", "Chemical Engineering", "Aerospace Engineering"),
        "College of Arts": ("History", "Philosophy", "Music", "Art History", "Theatre"),
        "College of Sciences": ("Physics", "Chemistry", "Biology", "Geology", "Astronomy"),
        "School of Business": ("Accounting", "Marketing", "Management", "Business Finance", "Entrepreneurship"),
        "School of Medicine": ("Anatomy", "Physiology", "Pharmacology", "Microbiology", "Immunology"),
        "School of Law": ("Corporate Law", "Criminal Law", "International Law", "Constitutional Law", "Environmental Law"),
        "School of Computing": ("Computer Science", "Information Systems", "Data Science", "Software Engineering", "Human-Computer Interaction"),
        "School of Education": ("Early Childhood Education", "Special Education", "Curriculum Studies", "Educational Psychology", "Adult Education"),
        "College of Humanities": ("Linguistics", "Classics", "Comparative Literature", "Religious Studies", "Creative Writing"),
        "School of Public Health": ("Epidemiology", "Biostatistics", "Health Policy", "Environmental Health", "Global Health"),
        "College of Social Sciences": ("Economics", "Sociology", "Anthropology", "Political Science", "Geography"),
        "School of Architecture": ("Urban Design", "Landscape Architecture", "Building Technology", "Historic Preservation", "Interior Architecture"),
    }
)  # fmt: skip

_GOV_MINISTRIES = (
    "Ministry of Health", "Ministry of Transport", "Ministry of Finance", "Ministry of Education",
    "Ministry of Justice", "Ministry of Defence", "Ministry of Agriculture",
    "Ministry of the Interior", "Ministry of Energy", "Ministry of Labour",
    "Ministry of Foreign Affairs", "Ministry of Housing", "Ministry of Culture",
    "Ministry of the Environment",
)  # fmt: skip

_GOV_BUREAUS = (
    "Bureau of Statistics", "Revenue Service", "Customs Agency", "Licensing Authority",
    "Procurement Agency", "Inspection Service", "Standards Board", "Audit Office",
    "Records Administration", "Grants Council", "Emergency Management Agency",
    "Consumer Protection Bureau", "Land Registry", "Patent Office", "Passport Service",
    "Vehicle Registration Agency", "Food Safety Authority", "Water Resources Board",
    "Border Service", "Veterans Agency", "Employment Service", "Pensions Board",
    "Maritime Authority", "Aviation Authority", "Forestry Commission", "Census Bureau",
    "Energy Regulator", "Public Works Agency", "Heritage Council", "Competition Authority",
)  # fmt: skip

_GOV_OFFICES = Combine(
    "{} {}",
    (
        "Northern", "Southern", "Eastern", "Western", "Central", "Coastal", "Highlands",
        "Capital", "Metropolitan", "Valley", "Lakeside", "Frontier", "Midlands", "Riverside",
        "Island", "Harbour",
    ),
    ("Field Office", "Regional Office", "Liaison Office", "Service Centre", "District Office"),
    distinct_first=False,
)  # fmt: skip

_AIRLINE_HUBS = (
    "Denver", "Atlanta", "Chicago", "Dallas", "Seattle", "Toronto", "Frankfurt", "Amsterdam",
    "Madrid", "Istanbul", "Dubai", "Singapore", "Tokyo", "Sydney", "Johannesburg", "Sao Paulo",
    "Mexico City", "Doha", "Zurich", "Copenhagen", "Helsinki", "Lisbon", "Vienna", "Seoul",
)  # fmt: skip

_AIRLINE_DESTINATIONS = (
    "Boise", "Tucson", "Omaha", "Halifax", "Reykjavik", "Porto", "Seville", "Bergen", "Krakow",
    "Split", "Tbilisi", "Muscat", "Colombo", "Perth", "Auckland", "Cebu", "Osaka", "Busan",
    "Nairobi", "Accra", "Lima", "Quito", "Havana", "Cancun", "Anchorage", "Fairbanks", "Malta",
    "Tromso", "Riga", "Tallinn", "Valencia", "Bordeaux", "Naples", "Marrakesh", "Hobart",
    "Darwin",
)  # fmt: skip


def _route(rng: np.random.Generator, hub: str) -> str:
    return f"{hub} to {_AIRLINE_DESTINATIONS[int(rng.integers(len(_AIRLINE_DESTINATIONS)))]}"


_RETAIL_REGIONS = (
    "Pacific Northwest", "Great Lakes", "New England", "Gulf Coast", "Mountain West", "Mid-Atlantic",
    "Southwest", "Great Plains", "Southeast", "California Coast", "Ohio Valley", "Tri-State Area",
    "Atlantic Canada", "Prairie Provinces", "British Isles", "Benelux", "Nordics", "Iberia",
)  # fmt: skip


_BANK_DESKS = Children(
    {
        "Retail Banking": ("Mortgages", "Personal Loans", "Savings Accounts", "Credit Cards", "Branch Services"),
        "Investment Banking": ("Mergers and Acquisitions", "Equity Capital Markets", "Debt Capital Markets", "Leveraged Finance"),
        "Wealth Management": ("Private Banking", "Estate Planning", "Family Office", "Portfolio Advisory"),
        "Commercial Banking": ("Trade Finance", "Cash Management", "Equipment Leasing", "Middle Market Lending"),
        "Risk Management": ("Credit Risk", "Market Risk", "Operational Risk", "Model Validation"),
        "Global Markets": ("FX Trading", "Rates Trading", "Commodities Desk", "Equity Derivatives"),
        "Financial Crime": ("Anti-Money Laundering", "Sanctions Screening", "Know Your Customer", "Fraud Investigations"),
        "Banking Technology": ("Core Banking Systems", "Fraud Detection", "Online Banking", "Payments Engineering"),
        "Banking Operations": ("Settlements", "Loan Servicing", "Reconciliation", "Custody Services"),
        "Asset Management": ("Fixed Income Funds", "Index Funds", "Real Estate Funds", "Multi-Asset Strategies"),
        "Corporate Treasury": ("Liquidity Management", "Funding", "Capital Planning", "Balance Sheet Management"),
        "Bancassurance": ("Life Insurance", "Home Insurance", "Auto Insurance", "Travel Insurance"),
    }
)  # fmt: skip

_TELECOM_TEAMS = Children(
    {
        "Mobile Network": ("Radio Access", "Core Network", "Spectrum Planning", "Tower Operations"),
        "Fiber Broadband": ("Fiber Rollout", "Home Installation", "Optical Transport", "Last Mile Engineering"),
        "Customer Care": ("Call Centre", "Technical Support", "Retention", "Complaints Resolution"),
        "Enterprise Solutions": ("Private Networks", "Managed SD-WAN", "Unified Communications", "Business Accounts"),
        "Network Security": ("DDoS Mitigation", "Signalling Security", "Fraud Management", "Lawful Intercept"),
        "Billing and Charging": ("Prepaid Charging", "Invoice Systems", "Revenue Assurance", "Tariff Design"),
        "Devices": ("Handset Certification", "Device Logistics", "Smartwatch Programme", "Router Firmware"),
        "Satellite Services": ("Ground Stations", "Maritime Connectivity", "Rural Coverage", "Satellite Backhaul"),
        "Field Engineering": ("Cable Repair", "Site Maintenance", "Power Systems", "Network Surveys"),
        "Roaming and Interconnect": ("Roaming Partnerships", "Interconnect Billing", "Number Portability", "International Voice"),
        "Internet of Things": ("Smart Meters", "Fleet Telematics", "eSIM Platform", "Industrial Sensors"),
        "Media and TV": ("IPTV Platform", "Content Licensing", "Streaming Apps", "Set-Top Boxes"),
    }
)  # fmt: skip

_PROPERTY_WORDS = (
    "Willow", "Harbour", "Maple", "Juniper", "Lantern", "Riverstone", "Elmwood", "Foxglove",
    "Kestrel", "Linden", "Marigold", "Northgate", "Parkside", "Rosewood", "Saltmarsh", "Thistle",
    "Wharfside", "Bellflower", "Copperbeech", "Hawthorn", "Ivybridge", "Quayside", "Seabreeze",
    "Sunhill",
)  # fmt: skip


def _unit(rng: np.random.Generator, building: str) -> str:
    # Units carry their building's first word ("Willow 12C"), as letting agents write them, so
    # that unit names are unique across a developer's whole portfolio.
    floor = int(rng.integers(1, 25))
    letter = "ABCDEFGH"[int(rng.integers(8))]
    return f"{building.split()[0]} {floor}{letter}"


def _location(rng: np.random.Generator, franchisee: str) -> str:
    places = (
        "Old Town", "Harbourfront", "Midtown", "Westgate", "Eastside", "Northpoint", "Southgate",
        "University District", "Station Square", "Airport Road", "Market Street", "Riverside Mall",
        "Lakeshore", "Hillcrest", "Civic Centre", "Docklands", "Canal Street", "Kingsway",
    )  # fmt: skip
    kinds = ("Drive-Thru", "Food Court", "Express", "Restaurant", "Kiosk")
    return f"{places[int(rng.integers(len(places)))]} {kinds[int(rng.integers(len(kinds)))]}"


_LEAGUES = (
    "Continental Basketball League", "Northern Hockey League", "Pacific Baseball Association",
    "United Football Conference", "Atlantic Rugby Union", "National Lacrosse League",
    "Premier Volleyball League", "Western Soccer Alliance", "Coastal Cricket League",
    "Metropolitan Handball League", "Great Lakes Hockey Association", "Southern Baseball League",
    "Eastern Basketball Association", "Federal Soccer League",
)  # fmt: skip

_MASCOTS = (
    "Falcons", "Bisons", "Mariners", "Comets", "Wolves", "Stallions", "Otters", "Pioneers",
    "Thunder", "Herons", "Rangers", "Foxes", "Lynx", "Storm", "Ravens", "Titans", "Coyotes",
    "Kestrels", "Badgers", "Vipers", "Monarchs", "Pilots", "Owls", "Mustangs",
)  # fmt: skip

_CLOUD_REGIONS = (
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1",
    "eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1", "eu-south-1",
    "me-central-1", "af-south-1", "ap-south-1", "ap-southeast-1", "ap-southeast-2",
    "ap-northeast-1", "ap-northeast-2", "ap-east-1",
)  # fmt: skip


def _cluster(rng: np.random.Generator, region: str) -> str:
    stages = ("prod", "staging", "canary", "batch", "edge")
    services = (
        "payments", "search", "auth", "checkout", "ingest", "billing", "media", "ml-serving",
        "ledger", "notifications", "analytics", "gateway",
    )  # fmt: skip
    stage = stages[int(rng.integers(len(stages)))]
    service = services[int(rng.integers(len(services)))]
    return f"{stage}-{service}-{int(rng.integers(1, 40)):02d}"


_AUTO_PROGRAMS = Children(
    {
        "Powertrain": ("Electric Motors", "Transmission", "Hybrid Systems", "Battery Packs"),
        "Chassis Engineering": ("Suspension", "Steering Systems", "Braking Systems", "Wheel and Tyre"),
        "Interior Design": ("Seating", "Cockpit Module", "Climate Control", "Cabin Acoustics"),
        "Autonomous Driving": ("Sensor Fusion", "Path Planning", "Lidar Perception", "Driver Monitoring"),
        "Infotainment": ("Navigation Software", "Voice Assistant", "Over-the-Air Updates", "Connected Services"),
        "Manufacturing Engineering": ("Body Shop", "Paint Shop", "Final Assembly", "Stamping"),
        "Vehicle Quality": ("Warranty Analysis", "Durability Testing", "Supplier Quality", "Crash Testing"),
        "Aftersales": ("Spare Parts", "Dealer Training", "Service Campaigns", "Roadside Assistance"),
        "Design Studio": ("Exterior Styling", "Colour and Trim", "Clay Modelling", "Concept Cars"),
        "Motorsport": ("Rally Programme", "Endurance Racing", "Aerodynamics", "Race Strategy"),
        "Vehicle Safety": ("Airbag Systems", "Active Safety", "Occupant Protection", "Pedestrian Safety"),
        "Purchasing": ("Raw Materials", "Semiconductor Sourcing", "Supplier Development", "Cost Engineering"),
    }
)  # fmt: skip

_STREET_NAMES = (
    "Maple", "Oak", "Cedar", "Elm", "Birch", "Willow", "Chestnut", "Sycamore", "Poplar",
    "Magnolia", "Hazel", "Aspen", "Laurel", "Juniper", "Hickory", "Rowan", "Alder", "Holly",
    "Linden", "Mulberry", "Spruce", "Cypress", "Beech", "Hawthorn", "Primrose", "Bluebell",
    "Orchard", "Meadow", "Mill", "Church",
)  # fmt: skip

_STREET_TYPES = ("Street", "Avenue", "Lane", "Road", "Drive", "Close", "Crescent", "Way", "Court")


def _house(rng: np.random.Generator, street: str) -> str:
    return f"{int(rng.integers(1, 220))} {street}"


_TOWNS = (
    "Ashbury", "Bexley Heath", "Clearwater", "Dunhaven", "Eastbrook", "Fernhill", "Goldcrest",
    "Harrowgate", "Inverleigh", "Juniper Falls", "Kettering Vale", "Lindenfield", "Moorcroft",
    "Northbridge", "Oakhaven", "Port Allerton", "Quinton", "Rosemead", "Silverdale", "Tamsworth",
    "Underhill", "Vinemont", "Whitby Cross", "Yorkton",
)  # fmt: skip

_MILITARY_COMMANDS = (
    "Northern Command", "Southern Command", "Eastern Command", "Western Command",
    "Pacific Command", "Atlantic Command", "Central Command", "Arctic Command",
    "Coastal Defence Command", "Strategic Reserve Command", "Special Operations Command",
    "Air Mobility Command", "Joint Logistics Command", "Cyber Command",
)  # fmt: skip

THEMES: tuple[Theme, ...] = (
    Theme(
        name="corporate",
        levels=("company", "division", "team"),
        fact_type="employment_assignment",
        description="which team of which division of which company the person works in",
        pools=(
            Combine("{} {}", BRAND_PREFIXES, ("Technologies", "Systems", "Labs", "Dynamics", "Industries", "Group")),
            _CORPORATE_TEAMS.parents(),
            _CORPORATE_TEAMS,
        ),
    ),
    Theme(
        name="medical_provider",
        levels=("health_system", "hospital", "department"),
        fact_type="medical_care",
        description="which department of which hospital of which health system treats the person",
        pools=(
            Combine("{} {}", BRAND_PREFIXES, ("Health", "Healthcare", "Medical Group", "Health Partners")),
            Combine("{} {}", CITIES, ("General Hospital", "Medical Center", "Regional Hospital", "Community Hospital")),
            Words(_HOSPITAL_DEPARTMENTS),
        ),
    ),
    Theme(
        name="education",
        levels=("university", "college", "department"),
        fact_type="academic_placement",
        description="which department of which college of which university the person studies in",
        pools=(
            Combine("{} {}", BRAND_PREFIXES + CITIES, ("University", "State University", "Polytechnic University")),
            _COLLEGE_DEPARTMENTS.parents(),
            _COLLEGE_DEPARTMENTS,
        ),
    ),
    Theme(
        name="military",
        levels=("command", "brigade", "battalion"),
        fact_type="military_posting",
        description="which battalion of which brigade of which command the person serves in",
        pools=(
            Words(_MILITARY_COMMANDS),
            Derived(_ordinal_unit(("Armored", "Infantry", "Airborne", "Mountain", "Artillery", "Cavalry", "Marine", "Aviation"), "Brigade")),
            Derived(_ordinal_unit(("Signal", "Engineer", "Medical", "Logistics", "Reconnaissance", "Military Police", "Air Defense", "Maintenance", "Transport", "Rifle"), "Battalion")),
        ),
    ),
    Theme(
        name="government_agency",
        levels=("ministry", "agency", "office"),
        fact_type="civil_service_posting",
        description="which office of which agency of which ministry the person works for",
        pools=(Words(_GOV_MINISTRIES), Words(_GOV_BUREAUS), _GOV_OFFICES),
    ),
    Theme(
        name="airline_routing",
        levels=("airline", "hub", "route"),
        fact_type="flight_itinerary",
        description="which route out of which hub of which airline the person is booked on",
        pools=(
            Combine("{} {}", BRAND_PREFIXES, ("Air", "Airways", "Airlines", "Aviation")),
            Words(_AIRLINE_HUBS),
            Derived(_route),
        ),
    ),
    Theme(
        name="retail",
        levels=("chain", "region", "store"),
        fact_type="store_assignment",
        description="which store of which region of which retail chain the person manages",
        pools=(
            Combine("{} {}", BRAND_PREFIXES, ("Mart", "Market", "Outfitters", "Home Goods", "Grocers", "Department Stores")),
            Words(_RETAIL_REGIONS),
            Combine("{} {}", CITIES, ("Superstore", "Outlet", "Mall Store", "Downtown Store", "Plaza Store", "Warehouse Store")),
        ),
    ),
    Theme(
        name="banking",
        levels=("bank", "division", "desk"),
        fact_type="banking_relationship",
        description="which desk of which division of which bank handles the person's account",
        pools=(
            Combine("{} {}", BRAND_PREFIXES, ("Bank", "Savings Bank", "Trust", "Financial", "Bancorp")),
            _BANK_DESKS.parents(),
            _BANK_DESKS,
        ),
    ),
    Theme(
        name="telecom",
        levels=("carrier", "department", "team"),
        fact_type="employment_assignment",
        description="which team of which department of which telecom carrier the person works in",
        pools=(
            Combine("{} {}", BRAND_PREFIXES, ("Telecom", "Mobile", "Communications", "Networks", "Wireless")),
            _TELECOM_TEAMS.parents(),
            _TELECOM_TEAMS,
        ),
    ),
    Theme(
        name="real_estate",
        levels=("developer", "building", "unit"),
        fact_type="residence",
        description="which unit of which building of which property developer the person rents",
        pools=(
            Combine("{} {}", BRAND_PREFIXES, ("Properties", "Realty", "Estates", "Developments", "Living")),
            Combine("{} {}", _PROPERTY_WORDS, ("Towers", "Court", "Residences", "Lofts", "House", "Gardens")),
            Derived(_unit),
        ),
    ),
    Theme(
        name="food_franchise",
        levels=("brand", "franchisee", "location"),
        fact_type="franchise_location",
        description="which location of which franchisee of which food brand the person runs",
        pools=(
            Combine("{} {}", ("Golden Crust", "Blue Ember", "Sunny Side", "Red Lantern", "Green Fork", "Big Sky", "Smokehouse", "Little Saigon", "Casa Verde", "Copper Kettle", "Rolling Pin", "Happy Dragon", "Prairie"), ("Pizza", "Burgers", "Tacos", "Noodle Bar", "Coffee", "Chicken", "Bakery")),
            Combine("{} {}", ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Brennan", "Castillo", "Novak", "Haddad", "Schmidt", "Patel", "Kowalski", "Mensah", "Duarte", "Ferreira", "Ivanova", "Nakamura", "Osei", "Rossi"), ("Restaurant Group", "Hospitality", "Foods", "Dining Partners", "Franchise Holdings")),
            Derived(_location),
        ),
    ),
    Theme(
        name="sports_league",
        levels=("league", "conference", "club"),
        fact_type="team_affiliation",
        description="which club of which conference of which league the person plays for",
        pools=(
            Words(_LEAGUES),
            Combine("{} {}", ("Atlantic", "Pacific", "Central", "Mountain", "Northern", "Southern", "Eastern", "Western", "Lakes", "Coastal", "Prairie", "Capital"), ("Conference", "Division")),
            Combine("{} {}", CITIES, _MASCOTS),
        ),
    ),
    Theme(
        name="cloud_infrastructure",
        levels=("provider", "region", "cluster"),
        fact_type="workload_placement",
        description="which cluster in which region of which cloud provider runs the person's service",
        pools=(
            Combine("{} {}", BRAND_PREFIXES, ("Cloud", "Compute", "Hosting", "Cloud Platform")),
            Words(_CLOUD_REGIONS),
            Derived(_cluster),
        ),
    ),
    Theme(
        name="automotive",
        levels=("automaker", "division", "program"),
        fact_type="employment_assignment",
        description="which program of which engineering division of which automaker the person works on",
        pools=(
            Combine("{} {}", BRAND_PREFIXES, ("Motors", "Automotive", "Motor Works", "Vehicles")),
            _AUTO_PROGRAMS.parents(),
            _AUTO_PROGRAMS,
        ),
    ),
    Theme(
        name="home_address",
        levels=("town", "street", "house"),
        fact_type="home_address",
        description="which house on which street of which town the person lives at",
        pools=(Words(_TOWNS), Combine("{} {}", _STREET_NAMES, _STREET_TYPES), Derived(_house)),
    ),
)  # fmt: skip

THEMES_BY_NAME: dict[str, Theme] = {t.name: t for t in THEMES}

PERSON_NAMES = (
    "Amara", "Bastian", "Camille", "Dmitri", "Esme", "Farah", "Gideon", "Hana", "Idris", "Jonas",
    "Keiko", "Lucia", "Mateo", "Nadia", "Oskar", "Priyanka", "Quentin", "Rosa", "Soren", "Tomas",
    "Uma", "Valentina", "Wendell", "Ximena", "Yusuf", "Zofia", "Anselm", "Beatrix", "Cyrus",
    "Delphine", "Emeka", "Freya", "Gustavo", "Halima", "Ingrid", "Jasper", "Kofi", "Leona",
    "Milan", "Noor", "Orla", "Pavel", "Rania", "Stellan", "Thandiwe", "Ulrich", "Vesna", "Wilhelmina",
)  # fmt: skip

ATTACKER_NAMES = (
    "Mallory", "Trudy", "Victor", "Sybil", "Oscar", "Ravi", "Greta", "Hugo", "Ines", "Jules",
    "Kasimir", "Lotte", "Magnus", "Nell", "Otto", "Petra", "Rufus", "Selma", "Tobias", "Vera",
    "Wanda", "Xavier", "Yara", "Zeno", "Agnes", "Bruno", "Clara", "Desmond", "Edith", "Felix",
)  # fmt: skip


def draw_tree(theme: Theme, rng: np.random.Generator) -> dict[str, object]:
    """One universe of `theme` in the published layout (39 globally unique names)."""
    taken: set[str] = set()

    def draw(pool: Pool, parent: str | None) -> list[str]:
        names = pool.draw(rng, 3, parent, taken)
        taken.update(normalise_name(n) for n in names)
        return names

    roots = draw(theme.pools[0], None)
    mids = {root: draw(theme.pools[1], root) for root in roots}
    leaves = {mid: draw(theme.pools[2], mid) for root in roots for mid in mids[root]}
    return {theme.levels[0]: roots, theme.levels[1]: mids, theme.levels[2]: leaves}
